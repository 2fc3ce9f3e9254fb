"""Issue 39: the JSONL stores' projection sidecar (backends/jsonl/sidecar.py).

A JSONL (and jsonl+zstd) store keeps its projections' rows in one SQLite database at its
root, written just after the log. Every read here is checked against the log's fold,
computed by the tests' own model (sidecar_support.Model), never by core's fold; and the
reads that should come from the rows say so (``folded == 0``: no event was folded to
answer). A sidecar that is missing, damaged, another store's, behind the log, locked or
unwritable is never trusted beyond what the log says, and never fails a write.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shutil
import signal
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sidecar_support import (
    KINDS,
    NOTES,
    PLAIN,
    REGISTRY,
    Answer,
    Last,
    Model,
    Text,
    answer,
    backend_of,
    log,
    opened,
    plugins,
    sidecar_path,
    stored_wires,
    write,
)

from dsh_session_core import PersistencePlugin
from dsh_session_core._persistence.backends.jsonl import buckets, sidecar
from dsh_session_core._persistence.backends.jsonl.backend import JsonlBackend
from dsh_session_core._persistence.backends.jsonl.sidecar import Sidecar
from dsh_session_core._persistence.capabilities import Capabilities, Projecting
from dsh_session_core._persistence.projections.read import summaries
from dsh_session_core._persistence.rows import RowChanges, RowQuery
from dsh_session_core.errors import PersistenceError
from dsh_session_core.testing.events import session_header

Factory = Callable[[], JsonlBackend]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "jsonl+zstd":
        pytest.importorskip("zstandard")
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def make(kind: str, root: Path) -> Factory:
    """Fresh backends over one store folder, as processes would open it."""
    return functools.partial(backend_of, kind, root)


def _expected(make: Factory, sid: str) -> Model:
    """The fold of what the log holds now."""
    return Model(stored_wires(make, sid))


def _equal_to_the_fold(got: Answer, model: Model) -> None:
    assert got.rows == model.rows
    assert got.summary == model.summary


def _marks(root: Path) -> dict[tuple[str, str], bytes]:
    with contextlib.closing(sqlite3.connect(sidecar_path(root))) as conn:
        return {(s, p): m for s, p, m in conn.execute(
            "SELECT session_id, projection, mark FROM marks")}


def _row_count(root: Path, sid: str) -> int:
    with contextlib.closing(sqlite3.connect(sidecar_path(root))) as conn:
        found: int = conn.execute("SELECT count(*) FROM rows WHERE session_id = ?",
                                  (sid,)).fetchone()[0]
        return found


# --- rows read back ---------------------------------------------------------------------


def test_rows_are_read_from_the_sidecar_and_equal_the_fold(make: Factory, root: Path) -> None:
    events = log({}, {"two_steps": True}, {"interrupted": True}, {}, {"two_steps": True})
    write(make, "s", [events[:3], events[3:10], events[10:11], events[11:]])
    got = answer(make, "s")
    assert got.folded == 0  # read from the rows: nothing folded
    assert got.covers == len(events)
    _equal_to_the_fold(got, Model(events))
    assert got.rows  # the last turns' rows, after the clear
    # Private, in WAL mode: the folder 0700, the database 0600.
    path = sidecar_path(root)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reads_by_key_range_and_newest_first_cost_what_they_return(
        make: Factory) -> None:
    events = log(*({} for _ in range(8)))
    write(make, "s", [events[:20], events[20:]])
    model = Model(events)
    users = sorted(k for k in model.rows if k.startswith("u"))
    with opened(make, "s") as view:
        assert view.folded == 0
        assert [k for k, _ in view.rows(prefix="u")] == users
        assert [k for k, _ in view.rows(prefix="u", newest_first=True, limit=3)] == \
            users[::-1][:3]
        assert [k for k, _ in view.rows(start=users[2], stop=users[5])] == users[2:5]
        assert [k for k, _ in view.rows(start=users[2], stop=users[5], newest_first=True,
                                        limit=2)] == [users[4], users[3]]
        assert view.get(users[1]) == Text(model.rows[users[1]])
        assert view.get("u99999999") is None
        assert {k: v.text for k, v in view.get_many([users[0], users[7], "nope"]).items()} \
            == {users[0]: model.rows[users[0]], users[7]: model.rows[users[7]]}
        assert view.rows(limit=0) == []
        assert view.summary() == model.summary
    # What each read asked the sidecar for is what it returned.
    backend = make()
    try:
        found = backend.projection_rows("s", NOTES.name, RowQuery(start="u", stop="v",
                                                                  newest_first=True, limit=2))
        assert [k for k, _ in found] == users[::-1][:2]
        found = backend.projection_rows("s", NOTES.name, RowQuery(keys=(users[3], "x")))
        assert [k for k, _ in found] == [users[3]]
    finally:
        backend.close()


def test_summaries_across_sessions_come_from_the_sidecar(make: Factory) -> None:
    write(make, "a", [log({"text": "from a"})])
    write(make, "b", [log({}, {"text": "from b"})])
    write(make, "c", [log({"interrupted": True})], registry=PLAIN)  # no rows kept
    backend = make()
    try:
        stored = backend.projection_summaries(NOTES.name)
        assert sorted(sid for sid, _, _ in stored) == ["a", "b"]
        assert [sid for sid, _, _ in backend.projection_summaries(NOTES.name, ["b", "z"])] \
            == ["b"]
        found = summaries(Capabilities.of(backend), REGISTRY, NOTES, ["a", "b", "c"])
    finally:
        backend.close()
    assert found == {"a": Last(1, "from a"), "b": Last(7, "from b"),
                     "c": Last(1, "ask 1")}  # c's folded from its log


def test_the_compact_backend_keeps_rows_as_the_plain_one_does(tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    backend = backend_of("jsonl+zstd", tmp_path / "z")
    assert Capabilities.of(backend).projecting is backend
    assert isinstance(backend, Projecting)
    backend.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.text(st.characters(exclude_categories=["Cs"],
                                            exclude_characters="\x00"), max_size=6),
                      min_size=1, max_size=8),
       bounds=st.tuples(st.text(max_size=3), st.text(max_size=3)),
       newest_first=st.booleans(), limit=st.none() | st.integers(1, 5))
def test_keys_are_read_in_code_point_order(texts: list[str], bounds: tuple[str, str],
                                           newest_first: bool, limit: int | None) -> None:
    # Keys of any text a key may hold (astral characters, U+E000-U+FFFF...; no NUL, no
    # lone surrogate: a fold refuses those) are stored as bytes and read back in
    # code-point order, the order a fold's rows have in memory.
    with tempfile.TemporaryDirectory() as folder:
        make = functools.partial(backend_of, "jsonl", Path(folder) / "store")
        events = log(*({"text": t} for t in texts))
        write(make, "s", [events])
        model = Model(events)
        lo, hi = "t:" + min(bounds), "t:" + max(bounds)
        keys = sorted(k for k in model.rows if lo <= k < hi)
        if newest_first:
            keys.reverse()
        with opened(make, "s") as view:
            assert view.folded == 0
            assert [k for k, _ in view.rows(prefix="t:")] == \
                sorted(k for k in model.rows if k.startswith("t:"))
            got = view.rows(start=lo, stop=hi, newest_first=newest_first, limit=limit)
            assert [k for k, _ in got] == keys[:limit]
            assert all(v.text == model.rows[k] for k, v in got)


def test_keys_with_lone_surrogates_are_kept_in_code_point_order(tmp_path: Path) -> None:
    # UTF-8 with surrogatepass keeps code-point order (U+D800 between U+D7FF and U+E000);
    # UTF-16 would put the astral character before U+E000.
    keys = ["\U00010000", "\ue000", "\ud800", "\ud7ff", "a", "", "\x00"]
    (tmp_path / "s").mkdir()
    car = Sidecar(str(tmp_path / "s"))
    try:
        change = RowChanges(NOTES.name, b"mark", rebuild=True,
                            rows={k: k.encode("utf-8", "surrogatepass") for k in keys})
        assert car.write("s", [change])
        assert [k for k, _ in car.rows("s", NOTES.name, RowQuery())] == sorted(keys)
        assert [k for k, _ in car.rows("s", NOTES.name, RowQuery(
            start="\ud7ff", stop="\ue001", newest_first=True))] == ["\ue000", "\ud800", "\ud7ff"]
        assert [k for k, _ in car.rows("s", NOTES.name, RowQuery(keys=("\ud800", "b")))] \
            == ["\ud800"]
    finally:
        car.close()


# --- a sidecar never trusted beyond the log ---------------------------------------------


def test_a_missing_sidecar_is_folded_never_made_by_a_reader_and_rebuilt_by_a_writer(
        make: Factory, root: Path) -> None:
    events = log({}, {"two_steps": True}, {})
    write(make, "s", [events[:6], events[6:]])
    shutil.rmtree(root / ".projections")
    got = answer(make, "s")
    assert got.folded > 0
    _equal_to_the_fold(got, Model(events))
    assert not (root / ".projections").exists()  # readers never write
    more = log({}, first=4, seq=len(events))
    write(make, "s", [more])  # the next writer rebuilds the rows from the log's start
    got = answer(make, "s")
    assert got.folded == 0
    _equal_to_the_fold(got, Model(events + more))


def test_a_garbage_sidecar_is_never_trusted_and_a_writer_replaces_it(
        make: Factory, root: Path) -> None:
    events = log({}, {"interrupted": True}, {})
    write(make, "s", [events])
    for leftover in sidecar_path(root).parent.iterdir():
        leftover.unlink()
    garbage = os.urandom(3000) + b"SQLite format 3\x00" + os.urandom(5000)
    sidecar_path(root).write_bytes(garbage)
    got = answer(make, "s")
    assert got.folded > 0
    _equal_to_the_fold(got, Model(events))
    assert sidecar_path(root).read_bytes() == garbage  # a reader leaves it as it is
    more = log({}, first=4, seq=len(events))
    write(make, "s", [more])
    assert sidecar_path(root).read_bytes() != garbage
    got = answer(make, "s")
    assert got.folded == 0
    _equal_to_the_fold(got, Model(events + more))


def test_a_sidecar_damaged_under_a_running_writer_is_replaced(
        make: Factory, root: Path) -> None:
    events = log({}, {}, {}, {})
    p = PersistencePlugin(make(), REGISTRY)
    try:
        p.create(session_header("s"))
        p.append("s", events[:12])
        # Garbage over the file the writer holds open, and its WAL files removed.
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(sidecar_path(root)) + suffix)
        sidecar_path(root).write_bytes(b"\x01" * 20000)
        p.append("s", events[12:18])
        _equal_to_the_fold(answer(make, "s"), Model(events[:18]))
        p.append("s", events[18:])
        _equal_to_the_fold(answer(make, "s"), Model(events))
    finally:
        p.close()
    with contextlib.closing(sqlite3.connect(sidecar_path(root))) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # The next writer of the session rebuilds its rows.
    more = log({}, first=5, seq=len(events))
    write(make, "s", [more])
    got = answer(make, "s")
    assert got.folded == 0
    _equal_to_the_fold(got, Model(events + more))


def test_a_sidecar_of_another_store_is_never_trusted(make: Factory, root: Path,
                                                     kind: str, tmp_path: Path) -> None:
    # Another store holds sessions of the same ids, other events (written at other
    # times): its sidecar copied in is never read as this store's rows.
    other = functools.partial(backend_of, kind, tmp_path / "other")
    write(other, "s", [log({"text": "elsewhere"}, {}, time=10_000)])
    write(other, "t", [log({"text": "elsewhere"})])
    mine = log({"text": "here"}, {"two_steps": True}, {}, time=50_000)
    write(make, "s", [mine])
    shutil.rmtree(root / ".projections")
    shutil.copytree(tmp_path / "other" / ".projections", root / ".projections")
    got = answer(make, "s")
    assert got.folded > 0
    _equal_to_the_fold(got, Model(mine))


def test_a_sidecar_replaced_under_a_running_writer_is_not_added_to(
        make: Factory, root: Path, kind: str, tmp_path: Path) -> None:
    # The writer's rows went with the file it wrote them to; the new file's rows of its
    # session (another store's, here) are no base for its next batch's.
    other = functools.partial(backend_of, kind, tmp_path / "other")
    write(other, "s", [log({"text": "elsewhere"}, time=10_000)])
    events = log({"text": "one"}, {"text": "two"}, time=50_000)
    p = PersistencePlugin(make(), REGISTRY)
    try:
        p.create(session_header("s"))
        p.append("s", events[:6])
        shutil.rmtree(root / ".projections")
        shutil.copytree(tmp_path / "other" / ".projections", root / ".projections")
        p.append("s", events[6:])
        _equal_to_the_fold(answer(make, "s"), Model(events))
    finally:
        p.close()


def test_a_stale_copy_of_the_sidecar_is_behind_and_its_tail_is_folded(
        make: Factory, root: Path) -> None:
    events = log({}, {"two_steps": True}, {"interrupted": True}, {}, {})
    write(make, "s", [events[:14]])  # two turns
    saved = root.parent / "saved"
    shutil.copytree(root / ".projections", saved)  # every writer closed: no WAL left
    write(make, "s", [events[14:20], events[20:]])
    shutil.rmtree(root / ".projections")
    shutil.copytree(saved, root / ".projections")
    got = answer(make, "s")
    assert got.folded == len(events) - 14  # the rows, and the log's tail past them
    _equal_to_the_fold(got, Model(events))


def test_a_writer_without_projections_leaves_the_rows_behind_the_next_catches_up(
        make: Factory) -> None:
    events = log({}, {"two_steps": True}, {"interrupted": True}, {}, {})
    write(make, "s", [events[:6]])
    write(make, "s", [events[6:20]], registry=PLAIN)  # a release without projections
    got = answer(make, "s")
    assert got.folded == 14
    _equal_to_the_fold(got, Model(events[:20]))
    write(make, "s", [events[20:]])  # catches up: the missed events, then the batch
    got = answer(make, "s")
    assert got.folded == 0
    _equal_to_the_fold(got, Model(events))


# --- writes that cannot reach the sidecar ---------------------------------------------------


def test_an_unwritable_sidecar_never_fails_a_flush(make: Factory, root: Path) -> None:
    events = log({}, {}, {})
    write(make, "s", [events[:6]])
    shutil.rmtree(root / ".projections")
    (root / ".projections").write_text("not a folder")
    write(make, "s", [events[6:12], events[12:]])  # the log is written all the same
    assert stored_wires(make, "s") == events
    got = answer(make, "s")
    assert got.folded > 0
    _equal_to_the_fold(got, Model(events))


@pytest.fixture
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A write after one that found the database locked tries again at once."""
    monkeypatch.setattr(sidecar, "_BUSY_PAUSE", 0.0)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """The sidecar's write lock, held by another connection (another process's long
    transaction)."""
    conn = sqlite3.connect(sidecar_path(root), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@pytest.mark.usefixtures("no_pause")
def test_a_batch_whose_rows_were_not_written_is_never_skipped_over(
        make: Factory, root: Path) -> None:
    # A flush whose rows the sidecar refused (locked past its timeout) leaves the rows
    # behind; the next flush must not add its own to them (they would look current,
    # missing the refused batch's rows): they are dropped, and readers fold.
    events = log({"text": "one"}, {"text": "two"}, {"text": "three"}, {"text": "four"})
    p = PersistencePlugin(make(), REGISTRY)
    try:
        p.create(session_header("s"))
        p.append("s", events[:6])
        with _locked(root):
            p.append("s", events[6:12])  # its rows left behind (waits out the timeout)
        got = answer(make, "s")
        assert got.folded == 6
        _equal_to_the_fold(got, Model(events[:12]))
        p.append("s", events[12:18])
        got = answer(make, "s")
        _equal_to_the_fold(got, Model(events[:18]))
        assert "t:two" in got.rows
        # The session loaded anew (its state read again): its rows are rebuilt.
        p.load("s")
        p.append("s", events[18:])
        got = answer(make, "s")
        assert got.folded == 0
        _equal_to_the_fold(got, Model(events))
    finally:
        p.close()


@pytest.mark.usefixtures("no_pause")
def test_rows_left_behind_are_caught_up_when_the_session_is_taken_again(
        kind: str, root: Path, make: Factory) -> None:
    # In one process: a flush whose rows were refused, the session released and taken
    # again by the same store: its writer reads the marks anew and adds what the rows
    # miss (the log's events past them) to its next batch's.
    from dsh_session_core import open_store

    url = str(root) if kind == "jsonl" else f"jsonl+zstd:///{root}"
    with open_store(url, plugin_manager=plugins()) as store:
        s = store.create("s")
        with s.turn() as t:
            t.user("question 1")
        store.flush(s)  # its rows written: the sidecar is made
        with s.turn() as t:
            t.user("question 2")
        with _locked(root):
            store.flush(s)  # the second turn's rows refused
        store.release(s)
        got = answer(make, "s")
        assert got.folded > 0
        _equal_to_the_fold(got, _expected(make, "s"))
        s = store.open("s")
        with s.turn() as t:
            t.user("question 3")
        store.flush(s)
        got = answer(make, "s")
        assert got.folded == 0
        _equal_to_the_fold(got, _expected(make, "s"))
        assert got.rows["t:question 2"] == "question 2"
        store.release(s)


@pytest.mark.usefixtures("no_pause")
def test_a_delete_whose_rows_cannot_be_removed_deletes_nothing(
        make: Factory, root: Path) -> None:
    write(make, "s", [log({"text": "private"})])
    backend = make()
    try:
        with _locked(root), pytest.raises(PersistenceError, match="cannot be removed"):
            backend.delete("s")
        assert backend.load_stored("s", PLAIN) is not None  # refused: still there
        assert _row_count(root, "s") > 0
        backend.delete("s")
    finally:
        backend.close()
    assert _row_count(root, "s") == 0


# --- removing -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["delete", "delete_held"])
def test_deleting_a_session_removes_its_rows(make: Factory, root: Path, how: str) -> None:
    write(make, "a", [log({"text": "a secret"})])
    write(make, "b", [log({}, {})])
    backend = make()
    try:
        if how == "delete":
            backend.delete("a")
        else:
            stored = backend.load_stored("a", PLAIN)
            assert stored is not None
            lock = backend.acquire(stored.header)
            try:
                backend.delete_held("a", lock)
            finally:
                lock.release()
    finally:
        backend.close()
    assert _row_count(root, "a") == 0
    assert {s for s, _ in _marks(root)} == {"b"}
    with contextlib.closing(sqlite3.connect(sidecar_path(root))) as conn:
        blob = b"".join(r for (r,) in conn.execute("SELECT row FROM rows"))
    assert b"a secret" not in blob
    got = answer(make, "b")
    assert got.folded == 0
    # A new session of the same id has its own rows only.
    again = log({"text": "new"})
    write(make, "a", [again])
    got = answer(make, "a")
    assert got.folded == 0
    _equal_to_the_fold(got, Model(again))


def test_a_rewrite_drops_the_session_rows(make: Factory, root: Path) -> None:
    events = log({}, {})
    write(make, "s", [events])
    write(make, "t", [events])
    backend = make()
    try:
        stored = backend.load_stored("s", PLAIN)
        assert stored is not None
        assert stored.jsonl is not None
        lock = backend.acquire(stored.header)
        try:
            backend.rewrite(stored.header, stored.events, stored.jsonl)
        finally:
            lock.release()
    finally:
        backend.close()
    assert {s for s, _ in _marks(root)} == {"t"}
    got = answer(make, "s")
    assert got.folded > 0
    _equal_to_the_fold(got, Model(events))


def test_a_newer_release_sidecar_is_left_as_it_is_until_a_delete(
        make: Factory, root: Path) -> None:
    events = log({}, {})
    write(make, "s", [events[:6]])
    with contextlib.closing(sqlite3.connect(sidecar_path(root))) as conn:
        conn.execute("PRAGMA user_version = 2")
    write(make, "s", [events[6:]])  # written without its rows
    with contextlib.closing(sqlite3.connect(sidecar_path(root))) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    got = answer(make, "s")
    assert got.folded > 0  # another version's rows are never read
    _equal_to_the_fold(got, Model(events))
    backend = make()
    try:
        backend.delete("s")  # its rows cannot be told apart: the whole sidecar goes
    finally:
        backend.close()
    assert not sidecar_path(root).exists()


def test_drop_projections_removes_every_session_rows(make: Factory, root: Path) -> None:
    write(make, "a", [log({})])
    write(make, "b", [log({})])
    backend = make()
    try:
        backend.drop_projections(None)
    finally:
        backend.close()
    assert _marks(root) == {}
    assert answer(make, "a").folded > 0


def test_a_folder_holding_only_a_sidecar_is_a_store_folder(tmp_path: Path) -> None:
    (tmp_path / ".projections").mkdir()
    assert buckets.foreign_entries(str(tmp_path)) == []


# --- readers that cannot write -------------------------------------------------------------

_READER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from sidecar_support import answer, backend_of
got = answer(lambda: backend_of(sys.argv[2], sys.argv[3]), "s")
print(json.dumps([got.rows, got.folded]))
"""


@pytest.mark.parametrize("with_sidecar", [False, True], ids=["none", "kept"])
def test_a_read_only_store_is_read_by_folding(kind: str, with_sidecar: bool) -> None:
    import json

    from unprivileged_support import run_unprivileged

    folder = Path(tempfile.mkdtemp(prefix="dsh-ro-sidecar-"))
    root = folder / "store"
    make = functools.partial(backend_of, kind, root)
    try:
        os.chmod(folder, 0o755)
        events = log({}, {"two_steps": True})
        write(make, "s", [events])
        if not with_sidecar:
            shutil.rmtree(root / ".projections")
        before = sorted(p.name for p in root.iterdir())
        kept = sorted(p.name for p in (root / ".projections").iterdir()) if with_sidecar \
            else []
        for path in [root, *root.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        here = str(Path(__file__).parent)
        done = run_unprivileged(["-c", _READER, here, kind, str(root)], reach=[str(root)],
                                path=[here], cwd="/")
        assert done.returncode == 0, done.stderr
        rows, _ = json.loads(done.stdout)
        assert rows == Model(events).rows
        assert sorted(p.name for p in root.iterdir()) == before  # nothing made
        if with_sidecar:
            assert sorted(p.name for p in (root / ".projections").iterdir()) == kept
    finally:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(folder)


def test_a_store_without_projections_never_loads_sqlite(tmp_path: Path) -> None:
    from process_support import python_prints

    code = f"""
import sys
from dsh_session_core import create_plugin_manager, open_store
with open_store({str(tmp_path / 'store')!r},
                plugin_manager=create_plugin_manager(autoload=False)) as store:
    s = store.create()
    s.append("turn/start", {{"turn": 1, "trigger": {{"kind": "message",
             "source": {{"kind": "user"}}}}}})
    store.flush(s)
    assert store.projection_summaries is not None
    store.release(s)
    store.delete(s.id)
print("sqlite3" in sys.modules)
"""
    assert python_prints(code) == "False"


# --- writers killed -----------------------------------------------------------------------


@pytest.fixture
def fork() -> Iterator[Callable[[Callable[[int], None]], tuple[int, int]]]:
    """Start ``target(write_fd)`` in a forked child; returns ``(pid, read_fd)``."""
    children: list[int] = []

    def start(target: Callable[[int], None]) -> tuple[int, int]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            code = 0
            try:
                os.close(r)
                target(w)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(w)
        children.append(pid)
        return pid, r

    yield start
    for pid in children:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _reports(fd: int, count: int) -> int:
    """Block until ``count`` reports arrived (or the child is gone); how many did."""
    buf = b""
    while buf.count(b"\n") < count:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    return buf.count(b"\n")


def _between_log_and_sidecar(make: Factory, batches: list[list[dict[str, Any]]],
                             report: int) -> None:
    """Child: write ``batches``, and die by SIGKILL in the last one's flush, after its
    log is written and before its rows are."""
    backend = make()
    real = backend._sidecar.write
    calls = [0]

    def write_then_die(*args: Any, **kwargs: Any) -> bool:
        calls[0] += 1
        if calls[0] == len(batches):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)

    backend._sidecar.write = write_then_die  # type: ignore[method-assign]
    p = PersistencePlugin(backend, REGISTRY)
    p.create(session_header("s"))
    for batch in batches:
        p.append("s", batch)
        os.write(report, b"flushed\n")


def test_a_writer_killed_between_its_log_and_its_sidecar(
        make: Factory, fork: Callable[[Callable[[int], None]], tuple[int, int]]) -> None:
    events = log({}, {"two_steps": True}, {})
    batches = [events[:6], events[6:13], events[13:]]
    pid, r = fork(functools.partial(_between_log_and_sidecar, make, batches))
    assert _reports(r, 3) == 2  # killed in the third flush
    _, status = os.waitpid(pid, 0)
    os.close(r)
    assert os.WIFSIGNALED(status)
    assert os.WTERMSIG(status) == signal.SIGKILL
    assert stored_wires(make, "s") == events  # the log was written
    got = answer(make, "s")
    assert got.folded == len(batches[-1])  # the rows behind by the last batch
    _equal_to_the_fold(got, Model(events))
    more = log({}, first=4, seq=len(events))
    write(make, "s", [more])  # the next writer catches up
    got = answer(make, "s")
    assert got.folded == 0
    _equal_to_the_fold(got, Model(events + more))


def _writer(make: Factory, seed: int, report: int) -> None:
    """Child: append turns to session "s" forever (created if missing), one flush each,
    reporting each."""
    rng = random.Random(seed)
    p = PersistencePlugin(make(), REGISTRY)
    stored = p.backend.load_stored("s", REGISTRY)
    if stored is None:
        p.create(session_header("s"))
        seq, number = 0, 1
    else:
        loaded = p.load("s")  # closes an interrupted turn
        seq = len(loaded.events)
        number = sum(1 for e in loaded.events if e.type == "turn/start") + 1
    while True:
        kw = rng.choice([{}, {"two_steps": True}, {"interrupted": True}])
        batch = log(kw, first=number, seq=seq, time=1_000_000 * seed)
        p.append("s", batch)
        seq, number = seq + len(batch), number + 1
        os.write(report, b"flushed\n")


def test_writers_killed_at_any_moment_leave_rows_that_never_contradict_the_log(
        make: Factory, fork: Callable[[Callable[[int], None]], tuple[int, int]]) -> None:
    rng = random.Random(39)
    for round_ in range(12):
        pid, r = fork(functools.partial(_writer, make, round_ + 1))
        wanted = rng.randrange(1, 4)
        assert _reports(r, wanted) >= wanted, "the writer died before reporting"
        os.kill(pid, signal.SIGKILL)  # somewhere in the next flush, or between two
        os.waitpid(pid, 0)
        os.close(r)
        _equal_to_the_fold(answer(make, "s"), _expected(make, "s"))
    assert sidecar_path(make().root).exists()


def _many(make: Factory, sid: str, report: int) -> None:
    """Child: write 15 turns to ``sid``, one flush each."""
    events = log(*({"two_steps": n % 3 == 0} for n in range(15)))
    write(make, sid, [events[i:i + 6] for i in range(0, len(events), 6)])
    os.write(report, b"done\n")


def test_processes_writing_their_own_sessions_at_once(
        make: Factory, root: Path,
        fork: Callable[[Callable[[int], None]], tuple[int, int]]) -> None:
    started = [fork(functools.partial(_many, make, f"w{i}")) for i in range(3)]
    for pid, r in started:
        assert _reports(r, 1) == 1
        _, status = os.waitpid(pid, 0)
        os.close(r)
        assert os.WIFEXITED(status)
        assert os.WEXITSTATUS(status) == 0
    for i in range(3):
        _equal_to_the_fold(answer(make, f"w{i}"), _expected(make, f"w{i}"))
    assert {s for s, _ in _marks(root)} == {"w0", "w1", "w2"}
