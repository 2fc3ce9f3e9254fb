"""Ctrl-C exits 130 in every command, and a command stopped half-way says what it did
and how to go on (``copy`` of a large store; ``prune`` and ``rekey`` stopped on a session
whose rows another client holds, the one before done; ``search`` while it searches and
while it prints); ``tail -F`` waits for a session (or a store, or a log file) that does
not exist yet while ``tail -f`` refuses it. Each runs the real command in a subprocess,
and waits on what it prints, or on the lock it waits for, never on a sleep."""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from cli_process import RUN, command_env, running

from dsh_session_core import Keyring, create_plugin_manager, open_store
from dsh_session_core._persistence.backends.jsonl.paths import log_path
from dsh_session_core._schema.codec import ENCODER
from lifecycle_support import Clock, opened, store_url, write


def _interrupt(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=60)


def _until(done: Callable[[], bool], proc: subprocess.Popen[bytes], within: float = 60
           ) -> None:
    """Wait for what ``done`` checks (polled: a server's view of its clients has nothing
    to wait on), while ``proc`` runs: the command must not have ended first."""
    deadline = time.monotonic() + within
    while not done():
        assert proc.poll() is None, f"the command ended first (status {proc.returncode})"
        assert time.monotonic() < deadline, "the command did nothing in time"
        time.sleep(0.001)


def _run(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUN, *argv], capture_output=True,
                          text=True, env=command_env(**env), timeout=120, check=False)


# --- Ctrl-C ---------------------------------------------------------------------------


def _large_store(root: Path, sessions: int) -> None:
    """A JSONL store of ``sessions`` sessions of one small log each (written as files:
    the library writes the first, the others are its copies under other ids)."""
    clock = Clock()
    with opened(str(root), clock) as store:
        write(store, clock, "s-0", turns=3)
        [header] = store.stored()
        events = Path(store.location("s-0")).read_bytes().split(b"\n", 1)[1]
    for i in range(1, sessions):
        sid = f"s-{i}"
        with open(log_path(root, None, sid), "wb") as f:
            f.write(ENCODER.encode(msgspec.structs.replace(header, id=sid)) + b"\n" + events)


def test_ctrl_c_stops_a_copy_with_130_and_says_what_was_kept(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    _large_store(tmp_path / "big", 1500)  # seconds of copying: stopped long before the end
    destination = store_url("sqlite", request, tmp_path, "copy")
    with running("copy", str(tmp_path / "big"), destination) as (proc, out, err):
        out.until(b": copied 9 event(s)")  # copying: one session is done
        assert _interrupt(proc) == 130
        stderr = err.rest().decode()
        assert "interrupted: the sessions and batches already copied are kept" in stderr
        assert "hint: run the same command again to resume" in stderr
        assert "Traceback" not in stderr


#: A PostgreSQL client waiting on a row or table lock, in this database, in a statement
#: that names ``table``.
_WAITING = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND wait_event_type = 'Lock' "
            "AND query ILIKE %s")


def _waits_on(url: str, table: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait until the command waits on a lock in a statement on ``table``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as watcher:
        _until(lambda: watcher.execute(_WAITING, (f"%{table}%",)).fetchone() == (1,), proc)


def _three_sessions(url: str, keys: Keyring | None = None) -> None:
    """Sessions a, b and c, oldest first (what prune removes first), old enough for
    ``--older-than 1d``."""
    clock = Clock()
    with open_store(url, keys=keys, clock=clock,
                    plugin_manager=create_plugin_manager(autoload=False)) as store:
        for i, sid in enumerate("abc"):
            write(store, clock, sid, at=1_700_000_000_000 + i * 1000)


@pytest.mark.parametrize("rule", [["--older-than", "1d"],
                                  ["--older-than", "1d", "--keep-latest", "0"]],
                         ids=["plain", "policy"])
def test_ctrl_c_stops_a_prune_with_130_and_says_which_sessions_it_removed(
    rule: list[str], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import psycopg

    url = store_url("postgresql", request, tmp_path)
    _three_sessions(url)
    argv = ("prune", *rule, "--yes", "--store", url)
    with psycopg.connect(url) as holder:
        # b's rows are held: its removal waits, a's (the oldest, the first) is done.
        holder.execute("SELECT seq FROM events WHERE session_id = 'b' FOR UPDATE")
        with running(*argv) as (proc, _out, err):
            _waits_on(url, "DELETE FROM events", proc)
            assert _interrupt(proc) == 130
            said = err.rest().decode().splitlines()
        holder.rollback()
        left = [row[0] for row in holder.execute("SELECT id FROM sessions ORDER BY id")]
    assert left[:2] == ["b", "c"]  # and the retention ledger
    assert said[0] == (f"dsh-session: interrupted: removed 1 session(s) from {url} (a); "
                       f"the others are as they were")
    assert said[1:] == ["hint: run the same command again to remove the rest; "
                        "`dsh-session prune --log` lists the removals recorded"]
    again = _run(*argv)  # and that resumes it
    assert again.returncode == 0, again.stderr
    with psycopg.connect(url) as conn:
        assert not conn.execute("SELECT id FROM sessions WHERE id IN ('a', 'b', 'c')"
                                ).fetchall()


def test_ctrl_c_before_prune_removed_anything_says_so(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import psycopg

    url = store_url("postgresql", request, tmp_path)
    _three_sessions(url)
    with psycopg.connect(url) as holder:
        holder.execute("SELECT seq FROM events WHERE session_id = 'a' FOR UPDATE")
        with running("prune", "--older-than", "1d", "--yes", "--store", url) as (
                proc, _out, err):
            _waits_on(url, "DELETE FROM events", proc)  # the first removal waits
            assert _interrupt(proc) == 130
            said = err.rest().decode().splitlines()
        holder.rollback()
        assert [row[0] for row in holder.execute("SELECT id FROM sessions ORDER BY id")
                ] == ["a", "b", "c", "dsh-session.retention"]  # a's removal announced
    assert said == [f"dsh-session: interrupted: nothing was removed from {url}",
                    "hint: run the same command again to remove the rest; "
                    "`dsh-session prune --log` lists the removals recorded"]


_K1, _K2 = bytes(range(32)), bytes(range(100, 132))
_ROTATED = {"ROTATED_KEYS": ",".join(f"{kid}:{base64.b64encode(key).decode()}"
                                     for kid, key in (("k2", _K2), ("k1", _K1)))}


def test_ctrl_c_stops_a_rekey_with_130_and_says_what_it_resealed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import psycopg

    url = store_url("postgresql", request, tmp_path)
    _three_sessions(url, Keyring({"k1": _K1}))
    argv = ("rekey", "a", "b", "c", "--store", url, "--key-env", "ROTATED_KEYS")
    with psycopg.connect(url) as holder:
        # b's rows are held: its rewrite waits, a's (the first named) is done.
        holder.execute("SELECT seq FROM events WHERE session_id = 'b' FOR UPDATE")
        proc = subprocess.Popen([sys.executable, "-c", RUN, *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=command_env(**_ROTATED))
        try:
            _waits_on(url, "events", proc)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        holder.rollback()
    assert proc.returncode == 130
    assert out.decode().splitlines() == ["a: 3 record(s) sealed under k2 (were: k1)"]
    assert err.decode().splitlines() == [
        'dsh-session: interrupted: rekeyed 1 of 3 session(s) (printed above); the others '
        'keep their old records, the one being resealed ("b") its old ones or its new '
        'ones, whole',
        "hint: run the same command again to rekey the rest (the 1 rekeyed are resealed "
        "again, harmlessly)"]
    again = _run(*argv, **_ROTATED)  # and that finishes it; b was left as it was
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["a: 3 record(s) sealed under k2 (were: k2)",
                                         "b: 3 record(s) sealed under k2 (were: k1)",
                                         "c: 3 record(s) sealed under k2 (were: k1)"]


def test_ctrl_c_while_search_prints_says_the_hits_are_partial(tmp_path: Path) -> None:
    root = tmp_path / "big"
    _large_store(root, 2000)  # 6,000 hits, several times what a pipe holds
    argv = ("search", "hello", "--limit", "0", "--store", str(root))
    whole = _run(*argv)
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.count("**hello**") == 6000
    with running(*argv) as (proc, out, err):
        first = out.until(b"**hello**")  # printing (the rest waits on the pipe, unread)
        proc.send_signal(signal.SIGINT)
        printed = (first + out.rest()).decode()  # read: the command can end
        assert proc.wait(timeout=60) == 130
        said = err.rest().decode().splitlines()
    match = re.fullmatch(r"dsh-session: interrupted after printing (\d+) of 6000 hit\(s\) "
                         r"\(and perhaps the next, whole or in part\): the output above is "
                         r"partial", said[0])
    assert match, said
    shown = int(match[1])
    assert shown < 6000
    assert said[1:] == [f"hint: --offset {shown} (with the same query) prints the rest"]
    # What it printed is the start of the whole output: the hits it counted, and perhaps
    # the next (each hit is written at once: a pipe takes so small a write whole).
    assert whole.stdout.startswith(printed)
    assert printed.count("**hello**") in (shown, shown + 1)
    rest = _run(*argv, "--offset", str(shown))
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.count("**hello**") == 6000 - shown


def test_ctrl_c_while_search_searches_says_nothing_was_printed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import psycopg

    url = store_url("postgresql", request, tmp_path)
    clock = Clock()
    with opened(url, clock) as store:
        write(store, clock, "s")
    with psycopg.connect(url) as holder:
        # The index is the store's own: a search waits on it while another holds it.
        holder.execute("LOCK TABLE search_docs IN ACCESS EXCLUSIVE MODE")
        with running("search", "hello", "--store", url) as (proc, out, err):
            _waits_on(url, "search_docs", proc)  # the search waits on the lock
            assert _interrupt(proc) == 130
            said = err.rest().decode().splitlines()
            assert out.rest() == b""
    assert said == [f"dsh-session: interrupted while searching {url}: no hit was printed",
                    "hint: search only reads: run it again (--session, --since or --type "
                    "search less)"]


def test_ctrl_c_stops_tail_f_with_130(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    clock = Clock()
    with opened(url, clock) as store:
        write(store, clock, "s")
    with running("tail", "-f", "-n", "1", "s", "--store", url) as (proc, out, err):
        out.until(b"turn/end")  # printed the last event: now following
        assert _interrupt(proc) == 130
        assert err.rest() == b""


# --- tail -F --------------------------------------------------------------------------

_CREATE = textwrap.dedent("""
    import sys
    from dsh_session_core import create_plugin_manager, open_store

    user = {"kind": "user"}
    with open_store(sys.argv[1], plugin_manager=create_plugin_manager(autoload=False)) as st:
        s = st.create(sys.argv[2])
        for turn in (1, 2):
            s.append("turn/start", {"turn": turn, "trigger": {"kind": "message",
                                                              "source": user}})
            s.append("user/message", {"content": [{"type": "text", "text": f"q{turn}"}],
                                      "source": user}, surface_op="append")
            s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        st.flush(s)
        st.release(s)
""")


def _create_in_another_process(url: str, session_id: str) -> None:
    subprocess.run([sys.executable, "-c", _CREATE, url, session_id], check=True, env=command_env())


@pytest.mark.parametrize("kind", ["jsonl", "jsonl+zstd", "sqlite", "postgresql"])
def test_tail_F_waits_for_a_session_made_later_and_prints_it_whole(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)  # no store yet: -F waits for it too
    with running("tail", "-F", "-n", "2", "--json", "later", "--store", url) as (
            proc, out, err):
        err.until(b"waiting for it")
        _create_in_another_process(url, "later")
        err.until(b'session "later" has appeared')
        lines = [out.until(b"\n") for _ in range(6)]  # every event, whatever -n says
        events = [json.loads(line) for line in lines]
        assert [(e["seq"], e["type"]) for e in events] == [
            (0, "turn/start"), (1, "user/message"), (2, "turn/end"),
            (3, "turn/start"), (4, "user/message"), (5, "turn/end")]
        assert _interrupt(proc) == 130


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_tail_f_still_refuses_a_session_that_does_not_exist(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    clock = Clock()
    with opened(url, clock) as store:
        write(store, clock, "other")
    proc = subprocess.run([sys.executable, "-c", RUN, "tail", "-f", "later", "--store", url],
                          capture_output=True, text=True, env=command_env(), timeout=60,
                          check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f'dsh-session: no session "later" in {url}')


def test_tail_F_of_an_existing_session_follows_it_as_tail_f(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    _create_in_another_process(url, "s")
    with running("tail", "-F", "-n", "1", "--json", "s", "--store", url) as (proc, out, err):
        assert json.loads(out.until(b"\n"))["seq"] == 5  # -n 1: the last event only
        assert _interrupt(proc) == 130
        assert err.rest() == b""


def test_tail_F_waits_for_a_log_file(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    with running("tail", "-F", "--json", "--file", str(path)) as (proc, out, err):
        err.until(b"waiting for it")
        clock = Clock()
        with opened(str(tmp_path / "store"), clock) as store:
            write(store, clock, "s")
            data = Path(store.location("s")).read_bytes()
        temp = tmp_path / "later.tmp"
        temp.write_bytes(data)
        temp.rename(path)  # whole at once, as a log is published
        err.until(b"has appeared")
        assert [json.loads(out.until(b"\n"))["type"] for _ in range(3)] == [
            "turn/start", "user/message", "turn/end"]
        assert _interrupt(proc) == 130


@pytest.mark.parametrize("debug", [False, True])
def test_what_a_driver_logs_while_unwinding_is_shown_only_with_debug(debug: bool) -> None:
    # psycopg logs "error ignored in rollback" when a Ctrl-C lands mid-query (CI caught
    # it printed beside the one-line message): the CLI gives its logger a handler of its
    # own, so logging's last resort stays quiet, except with --debug.
    code = textwrap.dedent("""
        import logging, sys
        from dsh_session_core._cli import main
        try:
            main.main([*sys.argv[1:], "ls", "--store", "/nonexistent/store"])
        except BaseException:  # --debug lets the store's error through
            pass
        logging.getLogger("psycopg").warning("error ignored in rollback")
    """)
    args = ["--debug"] if debug else []
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, check=False)
    assert ("error ignored in rollback" in done.stderr) is debug
