"""One damaged record does not take search down, nor vanish silently (issue 37, point
4): a record of a plaintext store whose bytes were cut in place (a JSONL line, a
database row's data) is reported, its session named in the answer's ``unreadable``
with a ``LogFormatError`` saying where, and every other hit is answered, the damaged
session's other records included. ``dsh-session search`` prints the hits, names the
session on stderr and exits 3. On each durable kind of store, its bytes edited behind
the store's back.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_session_core import open_store
from dsh_session_core._persistence.urls import local_store
from dsh_session_core.errors import LogFormatError
from dsh_session_core.testing import run_cli
from redis_support import entry_line, rewrite_entry

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


def _fill(url: str) -> None:
    """Sessions a, b, c: each says "needle" at seq 1 (the user) and seq 3 (the
    assistant)."""
    with open_store(url) as store:
        for sid in ("a", "b", "c"):
            s = store.create(sid)
            with s.turn() as turn:
                turn.user(f"the needle of {sid}")
                with turn.step() as step:
                    step.assistant(f"another needle, in {sid}")
            store.release(s)


def _cut(url: str, sid: str, seq: int, after: bytes) -> None:
    """Cut record ``seq`` of ``sid`` right after ``after`` in its stored bytes: what is
    left is no JSON (a JSONL line, or a row's ``data`` column)."""
    local = local_store(url)
    if local is not None and local[0] == "jsonl":
        [log] = Path(local[1]).glob(f"*/{sid}.jsonl")
        lines = log.read_bytes().split(b"\n")
        line = lines[seq + 1]
        lines[seq + 1] = line[:line.index(after) + len(after)]
        log.write_bytes(b"\n".join(lines))
        return
    if url.startswith("redis"):
        line = entry_line(url, sid, seq)
        rewrite_entry(url, sid, seq, line[:line.index(after) + len(after)])
        return
    statement = ("UPDATE events SET data = substr(data, 1, strpos(data, {m}) + {n}) "
                 "WHERE session_id = {m} AND seq = {m}")
    if local is not None:  # SQLite: instr, not strpos
        with contextlib.closing(sqlite3.connect(local[1])) as conn:
            conn.execute(statement.format(m="?", n=len(after) - 1).replace("strpos", "instr"),
                         (after.decode(), sid, seq))
            conn.commit()
        return
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(statement.format(m="%s", n=len(after) - 1), (after.decode(), sid, seq))


def _found(url: str) -> tuple[set[tuple[str, int]], list[tuple[str, LogFormatError]]]:
    with open_store(url) as store:
        hits = store.search("needle")
    errors = []
    for missed in hits.unreadable:
        assert isinstance(missed.error, LogFormatError)
        errors.append((missed.session_id, missed.error))
    return {(h.session_id, h.seq) for h in hits}, errors


def test_a_damaged_record_is_named_and_the_rest_is_answered(store_url: str) -> None:
    _fill(store_url)
    _cut(store_url, "b", 1, b"the needle")
    with open_store(store_url) as store, pytest.raises(LogFormatError):
        store.open("b")  # the session is damaged: a load refuses it
    found, errors = _found(store_url)
    assert found == {("a", 1), ("a", 3), ("b", 3), ("c", 1), ("c", 3)}
    [(sid, error)] = errors
    assert sid == "b"
    assert "seq 1" in str(error)
    assert "restore the log from a backup" in str(error)
    if store_url.startswith(("sqlite:", "postgresql:", "redis:")):
        return
    assert (Path(str(error.path)).name, error.line) == ("b.jsonl", 3)  # the header is 1


def test_the_cli_prints_the_hits_and_names_the_damaged_session(store_url: str) -> None:
    _fill(store_url)
    _cut(store_url, "c", 3, b"another needle")
    code, out, err = run_cli("search", "needle", "--store", store_url, "--json")
    assert code == 3, err
    assert {(h["session"], h["seq"]) for h in json.loads(out)} == {
        ("a", 1), ("a", 3), ("b", 1), ("b", 3), ("c", 1)}
    [line] = err.splitlines()
    assert line.startswith('dsh-session: warning: hits of session "c" may be missing: ')
    assert "1 damaged record" in line
    code, out, err = run_cli("search", "needle", "--store", store_url, "--session", "a")
    assert (code, err) == (0, "")  # the damaged session not asked for: a whole answer
    assert b"2 hit(s) in" in out


@pytest.mark.store_kinds("jsonl")
def test_the_parallel_scan_names_it_too(store_url: str) -> None:
    # The worker processes send the damaged lines back with their hits: in a fresh
    # process with no other thread, as the command line runs it (workers are forked
    # there, and only there).
    _fill(store_url)
    _cut(store_url, "a", 1, b"the needle")
    local = local_store(store_url)
    assert local is not None
    script = f"""
from dsh_session_core._persistence.backends.jsonl.scan import _may_fork, log_files, scan_files
from dsh_session_core._search import SearchQuery

root = {local[1]!r}
assert _may_fork()
for workers in (0, 2):
    hits = scan_files(root, sorted(log_files(root)), SearchQuery.parse("needle"),
                      workers=workers)
    assert len(hits) == 5, hits
    print(workers, [(u.session_id, u.error.line) for u in hits.unreadable])
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["0 [('a', 3)]", "2 [('a', 3)]"]


# A reader of a read-only copy: as this user, or (the tests run as root, who writes a
# 0444 file all the same) as nobody, in a process of its own.
_READER = """
import json, sys
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core.inspect import SearchQuery, search_store

backend = SqliteBackend(sys.argv[1], create=False)
found = search_store(backend, SearchQuery.parse("needle"))
backend.close()
print(json.dumps([sorted([h.session_id, h.seq] for h in found),
                  [[u.session_id, str(u.error)] for u in found.unreadable]]))
"""


@pytest.mark.store_kinds("sqlite")
def test_rows_no_index_covers_are_checked_too(store_url: str) -> None:
    # A writer without the index (the reference) went on writing session a, one of its
    # rows damaged, and the database is read-only: those rows are scanned, not looked
    # up in the index, and the damaged one is named all the same.
    import os
    import shutil
    import tempfile

    _fill(store_url)
    local = local_store(store_url)
    assert local is not None
    with contextlib.closing(sqlite3.connect(local[1])) as conn:
        row = conn.execute("SELECT * FROM events WHERE session_id = 'a' AND seq = 1"
                           ).fetchone()
        data = row[4]
        cut = data[:data.index("needle") + len("needle")]
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", [
            (row[0], 6, row[2], row[3], cut, row[5], row[6]),
            (row[0], 7, row[2], row[3], data, row[5], row[6])])
        conn.commit()
    folder = tempfile.mkdtemp(prefix="dsh-ro-")
    try:
        os.chmod(folder, 0o777)
        db = os.path.join(folder, "ro.db")
        shutil.copy(local[1], db)
        os.chmod(db, 0o444)
        done = subprocess.run([sys.executable, "-c", _READER, db], capture_output=True,
                              text=True, check=False, cwd=folder,
                              user="nobody" if os.geteuid() == 0 else None)
        assert done.returncode == 0, done.stderr
    finally:
        shutil.rmtree(folder)
    hits, [[sid, why]] = json.loads(done.stdout)
    assert hits == [["a", 1], ["a", 3], ["a", 7], ["b", 1], ["b", 3], ["c", 1], ["c", 3]]
    assert sid == "a"
    assert "(seq 6)" in why
