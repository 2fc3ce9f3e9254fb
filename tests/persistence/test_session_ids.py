"""Issue 11, defect 7: one session-id rule per backend, checked at ``create``.

Every id either is refused by ``create`` with :class:`SessionIdError` (naming the
backend's rule) before anything is written, or its session flushes and reloads. Before,
on JSONL an id of 233-249 ASCII characters (or 24 emoji) passed ``create`` and failed at
the first flush with ``OSError [Errno 36]``, losing what was appended; 250+ failed at
``create`` with a bare ``OSError``; ``""`` raised ``ValueError``; ``"a\\ud800b"`` passed
``create`` and failed at the flush. SQLite accepted all of them, so ``copy`` from SQLite
to JSONL failed with "run the copy again to retry", which could never succeed.

The rules (docs/backends.md, "Session ids"): every backend refuses the empty id and an
id with a lone surrogate; PostgreSQL also a NUL and more than 2048 UTF-8 bytes (a longer
id fails its B-tree indexes at the first flush); JSONL stores any other id, a long one
under a shortened file name, and keeps the reference's file name for the others.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core._persistence.backends.jsonl.paths import MAX_SEGMENT, encode_segment
from dsh_session_core._persistence.backends.memory import MemoryBackend
from dsh_session_core._persistence.base import Backend
from dsh_session_core._persistence.copy import copy_sessions
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.errors import SessionCwdError, SessionIdError, UnstorableError
from dsh_session_core.testing import run_cli

TURN = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
NAME_MAX = 255

# Ids of every kind: any code point (lone surrogates included), the characters the JSONL
# encoding escapes, and long ones (past the 232 characters of an encoded file name).
_CHARS = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.sampled_from(["😀", "中", "~", "/", ".", "\x00", "a", "-"]),
)
IDS = st.one_of(
    st.text(_CHARS, max_size=20),
    st.text(_CHARS, min_size=40, max_size=300),
    st.integers(200, 400).map(lambda n: "a" * n),
)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def _written(backend: Backend, tmp: Path) -> tuple[Any, ...]:
    """What storage holds: the listed sessions, and every file of the test's folder."""
    return (sorted(h.id for h in backend.list()), _files(tmp))


def _round_trip(factory: Callable[[], Backend], sid: str) -> None:
    """Create ``sid``, flush one event, and load it back through a fresh backend."""
    store = DurableStore(factory())
    session = store.create(sid)
    session.append("turn/start", TURN)
    store.flush(session)
    store.close()
    again = DurableStore(factory())
    try:
        assert sid in [h.id for h in again.stored()]
        reopened = again.open(sid)
        assert reopened.id == sid
        # The turn left open is closed by the repair on open, after the stored event.
        assert [e.type for e in reopened.events][:1] == ["turn/start"]
    finally:
        again.close()


def _refused(factory: Callable[[], Backend], sid: str, tmp: Path) -> SessionIdError:
    """``create`` refuses ``sid`` and nothing is written."""
    backend = factory()
    before = _written(backend, tmp)
    store = DurableStore(backend)
    with pytest.raises(SessionIdError) as caught:
        store.create(sid)
    assert store.get(sid) is None
    store.close()
    after = factory()
    try:
        assert _written(after, tmp) == before
    finally:
        after.close()
    return caught.value


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sid=IDS)
def test_any_id_is_refused_at_create_or_flushes_and_reloads(
    storage: Callable[[], Backend], tmp_path: Path, sid: str
) -> None:
    probe = storage()
    with DurableStore(probe) as again:
        if sid in {h.id for h in again.stored()}:  # drawn again (or replayed): it reloads
            assert again.open(sid).id == sid
            return
        try:
            again.backend.check_id(sid)
            refused = False
        except SessionIdError:
            refused = True
    if refused:
        error = _refused(storage, sid, tmp_path)
        assert error.session_id == sid
        assert error.rule in str(error)
        return
    _round_trip(storage, sid)


@pytest.mark.parametrize("sid", ["", "a\ud800b", "\udc00", "x" * 300 + "\ud83d"])
def test_the_empty_id_and_lone_surrogates_are_refused_everywhere_alike(
    storage: Callable[[], Backend], tmp_path: Path, sid: str
) -> None:
    error = _refused(storage, sid, tmp_path)
    assert isinstance(error, UnstorableError)  # the existing class callers catch
    assert "non-empty strings with a UTF-8 form (no lone surrogate)" in str(error)
    assert ("it is empty" if sid == "" else "lone surrogate") in error.problem
    assert str(error).endswith("choose another id")


LONG = [
    *("a" * n for n in (232, 233, 240, 249, 250, 255, 300)),
    "😀" * 23, "😀" * 24, "中" * 40, "中" * 47, "é~/" * 100, "x" * 2048,
]


@pytest.mark.parametrize("sid", LONG, ids=lambda s: f"{len(s)}x{s[:1]!r}")
def test_long_ids_flush_and_reload_where_the_backend_takes_them(
    storage: Callable[[], Backend], sid: str
) -> None:
    _round_trip(storage, sid)  # every one is within PostgreSQL's 2048 bytes too


@pytest.mark.parametrize("sid", ["a" * 233, "😀" * 24, "中" * 47, "x" * 100_000])
def test_jsonl_names_a_long_id_within_name_max_and_keeps_short_names(
    tmp_path: Path, sid: str
) -> None:
    from dsh_session_core._persistence.backends.jsonl.backend import JsonlBackend

    root = tmp_path / "root"
    _round_trip(lambda: JsonlBackend(root), sid)
    [log] = list(root.rglob("*.jsonl"))
    name = encode_segment(sid)
    assert log.name == name + ".jsonl"
    assert len(name) <= MAX_SEGMENT
    assert len((name + ".jsonl.0123456789ab.tmp").encode()) <= NAME_MAX
    assert "~H" in name  # the shortened form, never a reference name
    # An id the reference can store keeps the reference's file name.
    assert encode_segment("a" * 232) == "a" * 232
    assert encode_segment("中" * 46) == "~4E2D" * 46


def test_postgresql_refuses_a_nul_and_an_id_past_2048_bytes(
    postgresql_url: str, tmp_path: Path
) -> None:
    from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend

    made: list[PostgresBackend] = []

    def factory() -> Backend:
        made.append(PostgresBackend(postgresql_url))
        return made[-1]

    try:
        assert "NUL character" in _refused(factory, "a\x00b", tmp_path).problem
        too_long = _refused(factory, "é" * 1025, tmp_path)  # 2050 bytes
        assert "2,050 UTF-8 bytes" in too_long.problem
        assert "at most 2048 UTF-8 bytes" in str(too_long)
        _round_trip(factory, "é" * 1024)  # 2048 bytes: the limit itself
        _round_trip(factory, "x" * 2048)
    finally:
        for backend in made:
            backend.close()


def test_a_fork_into_an_id_the_backend_refuses_writes_nothing(tmp_path: Path) -> None:
    from dsh_session_core._persistence.backends.jsonl.backend import JsonlBackend

    store = DurableStore(JsonlBackend(tmp_path / "root"))
    parent = store.create("parent")
    parent.append("turn/start", TURN)
    parent.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.flush(parent)
    before = _files(tmp_path)
    with pytest.raises(SessionIdError):
        store.fork(parent, child_id="")
    assert _files(tmp_path) == before
    store.close()


# --- copy: the destination's rule, checked per session before copying ------------------


def _plant(backend: Backend, sid: str) -> None:
    """A session stored under ``sid`` without the create check: as another
    implementation (or an older build) may have stored it."""
    made = DurableStore(MemoryBackend())
    session = made.create("planted")
    session.append("turn/start", TURN)
    header = msgspec.structs.replace(session.header, id=sid)
    backend.append_batch(header, list(session.events), session.jsonl(), False)


def test_copy_reports_ids_the_destination_cannot_store_as_unstorable(tmp_path: Path) -> None:
    from dsh_session_core._persistence.backends.jsonl.backend import JsonlBackend
    from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend

    source = SqliteBackend(tmp_path / "s.db")
    for sid in ["", "ok", "a" * 300, "中" * 47]:
        _plant(source, sid)
    destination = JsonlBackend(tmp_path / "dst")
    try:
        report = copy_sessions(source, destination, ["", "ok", "a" * 300, "中" * 47])
        status = {s.session_id: s.status for s in report.sessions}
        assert status == {"": "unstorable", "ok": "copied", "a" * 300: "copied",
                          "中" * 47: "copied"}
        [refused] = [s for s in report.sessions if not s.ok]
        assert isinstance(refused.cause, SessionIdError)
        assert refused.error is not None
        assert "it is empty" in refused.error
        # Nothing was written for it, and a second run refuses it again (no retry loop).
        assert "" not in [h.id for h in destination.list()]
        again = copy_sessions(source, destination, [""])
        assert [s.status for s in again.sessions] == ["unstorable"]
        dry = copy_sessions(source, JsonlBackend(tmp_path / "dry"), ["", "ok"], dry_run=True)
        assert [s.status for s in dry.sessions] == ["unstorable", "copied"]
        assert not (tmp_path / "dry").exists()
    finally:
        source.close()
        destination.close()


def test_copy_to_postgresql_refuses_a_nul_or_too_long_id_before_writing(
    tmp_path: Path, postgresql_url: str
) -> None:
    from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend
    from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend

    source = SqliteBackend(tmp_path / "s.db")
    ids = ["a\x00b", "x" * 3000, "fine"]
    for sid in ids:
        _plant(source, sid)
    destination = PostgresBackend(postgresql_url)
    try:
        report = copy_sessions(source, destination, ids)
        assert [s.status for s in report.sessions] == ["unstorable", "unstorable", "copied"]
        assert [h.id for h in destination.list()] == ["fine"]
    finally:
        source.close()
        destination.close()


def test_the_copy_command_says_an_unstorable_session_is_not_worth_retrying(
    tmp_path: Path
) -> None:
    from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend

    source = SqliteBackend(tmp_path / "s.db")
    _plant(source, "")
    _plant(source, "ok")
    source.close()
    code, out, err = run_cli("copy", f"sqlite:///{tmp_path}/s.db", str(tmp_path / "dst"))
    assert code == 1
    assert "Traceback" not in err
    assert "1 unstorable" in out.decode()
    errors = [line for line in err.splitlines() if line.startswith("dsh-session: error: ")]
    assert len(errors) == 1
    assert f"dsh-session: created the JSONL store {tmp_path / 'dst'} " in err  # issue 24
    assert 'session "" unstorable' in errors[0]
    assert "it is empty" in errors[0]
    hints = [line for line in err.splitlines() if line.startswith("hint: ")]
    assert hints == [hints[0]]
    assert "copying again will not help" in hints[0]
    assert "retry" not in err
    assert os.path.isdir(tmp_path / "dst")


# --- the other strings of a header: cwd and parent session ---------------------------------


@pytest.mark.parametrize(("field", "value"), [
    ("cwd", "/a\ud800b"), ("cwd", "/home/\udcff"), ("parent_session", "p\udc80"),
])
def test_a_header_string_without_a_utf8_form_is_refused_at_create_on_every_backend(
    storage: Callable[[], Backend], tmp_path: Path, field: str, value: str
) -> None:
    # Before, JSONL failed the first flush with a bare UnicodeEncodeError and SQLite with
    # UnstorableError, both after the appends were made. (A cwd from os.getcwd() in a
    # folder whose name is not UTF-8 holds such surrogate escapes.)
    backend = storage()
    before = _written(backend, tmp_path)
    store = DurableStore(backend)
    expected = SessionCwdError if field == "cwd" else UnstorableError
    create = functools.partial(store.create, "h")
    with pytest.raises(expected, match=r"lone surrogate \(U\+D[89A-F][0-9A-F]{2} at index"):
        create(cwd=value) if field == "cwd" else create(parent_session=value)
    assert store.get("h") is None
    store.close()
    after = storage()
    try:
        assert _written(after, tmp_path) == before
    finally:
        after.close()
