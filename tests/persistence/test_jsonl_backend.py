"""The JSONL backend at the backend seam (spec plugins-persistence §9, §13 scenarios 47-65).

Expected bytes, sizes and messages come from the spec text. The coordinator-level
scenarios (62, 63, and the contract suite) live with the coordinator; here each hook is
driven directly, as the coordinator would drive it.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from dsh_session_core import Event, OpaqueEvent, Session, SessionHeader, core_registry
from dsh_session_core._logformat import logfile as logfile_mod
from dsh_session_core._logformat.logfile import ScanResult, scan_log
from dsh_session_core._model.repair import interrupted_turn_closers
from dsh_session_core._persistence.backends.jsonl import ends as jsonl_ends
from dsh_session_core._persistence.backends.jsonl import files as files_mod
from dsh_session_core._persistence.backends.jsonl.backend import JsonlBackend
from dsh_session_core._persistence.backends.jsonl.paths import encode_segment, log_path, session_dir
from dsh_session_core._persistence.base import Backend, SessionLockedError, StoredLog, WriterLock
from dsh_session_core._schema.codec import ENCODER, encode_events
from dsh_session_core.errors import LogFormatError, SkippedLogWarning
from spec_logs import ONE_TURN_LOG

REGISTRY = core_registry()

# --- the spec's fixtures ------------------------------------------------------------------

SPEC_HEADER_LEN = 72  # "header line 72 bytes incl. newline"

#: §13 scenario 53's header.
X_HEADER = b'{"type":"session","version":0,"id":"x","createdAt":1}\n'


def ts_line(seq: int, turn: int) -> bytes:
    """TS(seq, turn) as a log line (time = seq + 1)."""
    return (
        b'{"type":"turn/start","seq":%d,"time":%d,"data":{"turn":%d,"trigger":'
        b'{"kind":"message","source":{"kind":"user"}}}}\n' % (seq, seq + 1, turn)
    )


def te_line(seq: int, turn: int, kind: str = "completed") -> bytes:
    return (
        b'{"type":"turn/end","seq":%d,"time":%d,"data":{"turn":%d,"reason":{"kind":"%s"}}}\n'
        % (seq, seq + 1, turn, kind.encode())
    )


def step_start_line(seq: int, turn: int = 1, step: int = 1) -> bytes:
    return b'{"type":"step/start","seq":%d,"time":%d,"data":{"turn":%d,"step":%d}}\n' % (
        seq, seq + 1, turn, step)


def meta(session_id: str, cwd: str | None = None, **extra: Any) -> SessionHeader:
    """meta(id, cwd?) = {version: 0, id, createdAt: 1000[, cwd]}."""
    return SessionHeader(version=0, id=session_id, created_at=1000,
                         cwd=UNSET if cwd is None else cwd, **extra)


# --- events, built through a Session (never decoded from the expected bytes) ---------------

Entry = tuple[str, dict[str, Any], int, dict[str, Any]]


def TS(seq: int, turn: int, time: int | None = None) -> Entry:
    data = {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    return ("turn/start", data, seq + 1 if time is None else time, {})


def TE(seq: int, turn: int, kind: str = "completed", time: int | None = None) -> Entry:
    return ("turn/end", {"turn": turn, "reason": {"kind": kind}},
            seq + 1 if time is None else time, {})


def STEP(kind: str, time: int, turn: int = 1, step: int = 1) -> Entry:
    return (f"step/{kind}", {"turn": turn, "step": step}, time, {})


ONE_TURN: list[Entry] = [
    TS(0, 1),
    ("user/message", {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
     2, {"surface_op": "append"}),
    STEP("start", 3),
    ("assistant/message", {"turn": 1, "step": 1, "content": [{"type": "text", "text": "hello"}]},
     4, {"surface_op": "append"}),
    STEP("end", 5),
    TE(5, 1),
]


def build(entries: list[Entry], before: list[Event] | None = None) -> tuple[list[Event], bytes]:
    """Append ``entries`` to a session seeded with ``before``: the new events and their
    log lines."""
    session = Session("builder", seed=before or [])
    start = len(session.events)
    for etype, data, time, kw in entries:
        session.clock = itertools.repeat(time).__next__
        session.append(etype, data, **kw)
    return list(session.events)[start:], session.jsonl(start)


def persist(backend: JsonlBackend, header: SessionHeader, entries: list[Entry],
            before: list[Event] | None = None) -> list[Event]:
    """Append ``entries`` as one batch (materializing when ``before`` is empty)."""
    events, lines = build(entries, before)
    backend.append_batch(header, events, lines, materialized=bool(before))
    return [*(before or []), *events]


def seqs(log: StoredLog | ScanResult | None) -> list[int]:
    assert log is not None
    return [e.seq for e in log.events]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "root"


@pytest.fixture
def backend(root: Path) -> Iterator[JsonlBackend]:
    b = JsonlBackend(root)
    yield b
    b.close()


def write_raw(root: Path, cwd: str | None, session_id: str, data: bytes) -> Path:
    """A log file put in place by hand (a reference log, or a damaged one)."""
    path = Path(log_path(root, cwd, session_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_the_backend_implements_the_protocol(backend: JsonlBackend, root: Path) -> None:
    assert isinstance(backend, Backend)
    assert backend.name == "session-persistence-jsonl"
    assert isinstance(backend.acquire(meta("p")), WriterLock)


def test_the_root_is_made_absolute_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    backend = JsonlBackend("store")
    monkeypatch.chdir("/")
    persist(backend, meta("s1", "/work"), ONE_TURN)
    backend.close()
    assert (tmp_path / "store" / "cwd-0c9a453fad61" / "s1.jsonl").is_file()


# --- §9.1 layout ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        ("a/b", "a~002Fb"),
        ("/etc/passwd", "~002Fetc~002Fpasswd"),
        ("a\0b", "a~0000b"),
        ("a~b", "a~007Eb"),
        ("plain-ID_1.2", "plain-ID_1.2"),
        ("../../etc/pwn", "..~002F..~002Fetc~002Fpwn"),
        ("é", "~00E9"),
        ("😀", "~D83D~DE00"),
        (" ", "~0020"),
        ("\ud800", "~D800"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
    ],
)
def test_s49_encode_segment_table(raw: str, encoded: str) -> None:
    assert encode_segment(raw) == encoded


def test_s49_an_empty_segment_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^cannot encode an empty path segment$"):
        encode_segment("")


def test_s49_buckets_and_paths() -> None:
    assert session_dir("/r", None) == "/r/_no-cwd"
    assert log_path("/r", "/w", "a/b") == "/r/cwd-d1bb8ca35467/a~002Fb.jsonl"
    examples = {"/work": "cwd-0c9a453fad61", "/w": "cwd-d1bb8ca35467",
                "/proj": "cwd-79903f0c2002", "/other": "cwd-bf2faee25960",
                "/a": "cwd-6a50dc858413"}
    for cwd, bucket in examples.items():
        assert session_dir("/r", cwd) == f"/r/{bucket}"
    # A lone surrogate (os.getcwd() makes them from undecodable bytes) is hashed as
    # Node hashes it: as U+FFFD.
    assert session_dir("/r", "/x\udcff") == session_dir("/r", "/x\ufffd")
    # An empty cwd is a cwd (sha256 of ""), not the no-cwd bucket.
    assert session_dir("/r", "") == "/r/cwd-e3b0c44298fc"


@settings(max_examples=300)
@given(st.lists(st.text(min_size=1), min_size=2, max_size=2, unique=True))
def test_s49_encode_segment_is_injective_and_never_path_syntax(pair: list[str]) -> None:
    a, b = (encode_segment(s) for s in pair)
    assert a != b
    for name in (a, b):
        assert "/" not in name
        assert "\0" not in name
        assert name not in (".", "..")


# --- §9.2/§9.3 writing ----------------------------------------------------------------------


def test_s1_materializing_writes_the_spec_example_byte_for_byte(
    backend: JsonlBackend, root: Path
) -> None:
    events = persist(backend, meta("s1", "/work"), ONE_TURN)
    path = root / "cwd-0c9a453fad61" / "s1.jsonl"
    assert path.read_bytes() == ONE_TURN_LOG
    assert len(ONE_TURN_LOG) == 671
    assert ONE_TURN_LOG.index(b"\n") + 1 == SPEC_HEADER_LEN
    loaded = backend.load_stored("s1", REGISTRY)
    assert loaded == StoredLog(meta("s1", "/work"), events, None, ONE_TURN_LOG[SPEC_HEADER_LEN:])


def test_a_fork_header_is_written_in_the_spec_key_order(backend: JsonlBackend,
                                                       root: Path) -> None:
    header = SessionHeader(version=0, id="persist-child", created_at=5, cwd="/workspace",
                           parent_session="persist-parent", seed_length=3)
    persist(backend, header, ONE_TURN)
    first = Path(log_path(root, "/workspace", "persist-child")).read_bytes().split(b"\n")[0]
    assert first == (
        b'{"type":"session","version":0,"id":"persist-child","createdAt":5,'
        b'"cwd":"/workspace","parentSession":"persist-parent","seedLength":3}'
    )
    loaded = backend.load_live("persist-child", "/workspace", REGISTRY)
    assert loaded is not None
    assert loaded.header == header


def test_files_are_0600_and_directories_0700(root: Path) -> None:
    (root / "deep").mkdir(parents=True)  # a store is made in a folder that exists
    old = os.umask(0o022)
    try:
        backend = JsonlBackend(root / "deep" / "er")
        persist(backend, meta("s1", "/work"), ONE_TURN)
        backend.acquire(meta("s1", "/work"))
        backend.close()
    finally:
        os.umask(old)
    bucket = root / "deep" / "er" / "cwd-0c9a453fad61"
    for d in (root / "deep" / "er", bucket):  # what the store made
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    for f in (bucket / "s1.jsonl", bucket / "s1.lock"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert sorted(p.name for p in bucket.iterdir()) == ["s1.jsonl", "s1.lock"]  # no .tmp


def test_materializing_over_an_existing_log_is_refused(backend: JsonlBackend,
                                                       root: Path) -> None:
    persist(backend, meta("dup", "/w"), ONE_TURN)
    events, lines = build(ONE_TURN)
    with pytest.raises(FileExistsError, match=(
        r'^refusing to materialize "dup": a log already exists on disk '
        r"\(load/resume it instead\)$"
    )):
        JsonlBackend(root).append_batch(meta("dup", "/w"), events, lines, materialized=False)
    assert Path(log_path(root, "/w", "dup")).read_bytes() == ONE_TURN_LOG.replace(
        b'"id":"s1","createdAt":1000,"cwd":"/work"', b'"id":"dup","createdAt":1000,"cwd":"/w"')
    assert [p.name for p in Path(session_dir(root, "/w")).iterdir()] == ["dup.jsonl"]


def test_materializing_makes_every_new_entry_durable(
    backend: JsonlBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real = files_mod.fsync_dir

    def record(path: str) -> None:
        synced.append(path)
        real(path)

    monkeypatch.setattr(files_mod, "fsync_dir", record)
    persist(backend, meta("s1", "/work"), ONE_TURN)
    assert synced == [str(root.parent), str(root), session_dir(root, "/work")]


def test_a_publication_that_is_not_durable_is_withdrawn(
    backend: JsonlBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = files_mod.fsync_dir

    def bucket_fails(path: str) -> None:
        if path == session_dir(root, "/work"):
            raise OSError(errno.EIO, "simulated directory fsync EIO")
        real(path)

    monkeypatch.setattr(files_mod, "fsync_dir", bucket_fails)
    events, lines = build(ONE_TURN)
    with pytest.raises(OSError, match="simulated directory fsync EIO"):
        backend.append_batch(meta("s1", "/work"), events, lines, materialized=False)
    # Never acknowledged, so not left published: a retry materializes again.
    assert list(Path(session_dir(root, "/work")).iterdir()) == []
    monkeypatch.undo()
    backend.append_batch(meta("s1", "/work"), events, lines, materialized=False)
    assert Path(log_path(root, "/work", "s1")).read_bytes() == ONE_TURN_LOG


def test_a_failed_link_publishes_nothing_and_leaves_no_temp(
    backend: JsonlBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_link(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "hard links not supported here")

    # The module calls os.link (os.fsync, os.write...) through the os module, so
    # patching the module attribute reaches it.
    monkeypatch.setattr(os, "link", no_link)
    events, lines = build(ONE_TURN)
    with pytest.raises(OSError, match="hard links not supported"):
        backend.append_batch(meta("s1", "/work"), events, lines, materialized=False)
    assert list(Path(session_dir(root, "/work")).iterdir()) == []
    monkeypatch.undo()
    backend.append_batch(meta("s1", "/work"), events, lines, materialized=False)
    assert Path(log_path(root, "/work", "s1")).read_bytes() == ONE_TURN_LOG


def test_an_empty_batch_writes_nothing(backend: JsonlBackend, root: Path) -> None:
    backend.append_batch(meta("eb", "/w"), [], b"", materialized=False)
    assert not root.exists()
    assert backend.list() == []


def test_appending_to_a_vanished_log_does_not_recreate_it(backend: JsonlBackend,
                                                          root: Path) -> None:
    events = persist(backend, meta("gone", "/w"), ONE_TURN)
    backend.close()  # drop the kept descriptor, as a fresh process would have none
    os.unlink(log_path(root, "/w", "gone"))
    more, lines = build([TS(6, 2), TE(7, 2)], events)
    with pytest.raises(FileNotFoundError):
        backend.append_batch(meta("gone", "/w"), more, lines, materialized=True)
    assert not Path(log_path(root, "/w", "gone")).exists()


def test_short_writes_are_completed(backend: JsonlBackend, root: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def dribble(fd: int, data: Any) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:7]))

    monkeypatch.setattr(os, "write", dribble)
    events = persist(backend, meta("s1", "/work"), ONE_TURN)
    persist(backend, meta("s1", "/work"), [TS(6, 2), TE(7, 2)], events)
    monkeypatch.undo()
    assert len(calls) > 671 // 7
    expected = ONE_TURN_LOG + ts_line(6, 2) + te_line(7, 2)
    assert Path(log_path(root, "/work", "s1")).read_bytes() == expected


def test_a_write_that_makes_no_progress_fails(backend: JsonlBackend, root: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    events = persist(backend, meta("s1", "/work"), ONE_TURN)
    calls = itertools.count()

    def stuck(fd: int, data: Any) -> int:
        if next(calls) > 100:  # the loop should have given up long ago
            raise AssertionError("spinning on a write that writes nothing")
        return 0

    monkeypatch.setattr(os, "write", stuck)
    more, lines = build([TS(6, 2), TE(7, 2)], events)
    with pytest.raises(OSError, match="write made no progress"):
        backend.append_batch(meta("s1", "/work"), more, lines, materialized=True)
    monkeypatch.undo()
    assert Path(log_path(root, "/work", "s1")).read_bytes() == ONE_TURN_LOG


def test_concurrent_appends_to_different_sessions(
    backend: JsonlBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # More writer threads than kept descriptors: eviction must never close a descriptor
    # another thread is writing through.
    monkeypatch.setattr(jsonl_ends, "MAX_OPEN_LOGS", 2)
    ids = [f"t{i}" for i in range(6)]

    def writer(sid: str) -> None:
        events = persist(backend, meta(sid, "/w"), ONE_TURN)
        for turn in range(2, 12):
            seq = len(events)
            events = persist(backend, meta(sid, "/w"), [TS(seq, turn), TE(seq + 1, turn)],
                             events)

    with ThreadPoolExecutor(max_workers=len(ids)) as pool:
        list(pool.map(writer, ids))
    for sid in ids:
        assert seqs(backend.load_live(sid, "/w", REGISTRY)) == list(range(26))


def test_a_write_failing_halfway_is_rolled_back(backend: JsonlBackend, root: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    events = persist(backend, meta("s1", "/work"), ONE_TURN)
    real_write = os.write

    def half_then_fail(fd: int, data: Any) -> int:
        if len(data) > 20:
            return real_write(fd, bytes(data[:20]))
        raise OSError(errno.ENOSPC, "simulated write ENOSPC")

    monkeypatch.setattr(os, "write", half_then_fail)
    more, lines = build([TS(6, 2), TE(7, 2)], events)
    with pytest.raises(OSError, match="simulated write ENOSPC"):
        backend.append_batch(meta("s1", "/work"), more, lines, materialized=True)
    monkeypatch.undo()
    assert Path(log_path(root, "/work", "s1")).read_bytes() == ONE_TURN_LOG
    backend.append_batch(meta("s1", "/work"), more, lines, materialized=True)
    assert seqs(backend.load_stored("s1", REGISTRY)) == list(range(8))


def test_s60_a_failed_fsync_rolls_the_append_back(backend: JsonlBackend, root: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    events = persist(backend, meta("s1", "/work"), ONE_TURN)
    path = Path(log_path(root, "/work", "s1"))
    size = path.stat().st_size
    real_fsync = os.fsync
    failures = [OSError(errno.ENOSPC, "simulated fsync ENOSPC")]

    def fsync_once(fd: int) -> None:
        if failures:
            raise failures.pop()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_once)
    more, lines = build([TS(6, 2, time=9), TE(7, 2, time=10)], events)
    with pytest.raises(OSError, match="simulated fsync ENOSPC"):
        backend.append_batch(meta("s1", "/work"), more, lines, materialized=True)
    assert path.stat().st_size == size == 671
    backend.append_batch(meta("s1", "/work"), more, lines, materialized=True)
    assert seqs(JsonlBackend(root).load_stored("s1", REGISTRY)) == list(range(8))


def test_a_failed_rollback_is_reported_with_the_original_error(
    backend: JsonlBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = persist(backend, meta("s1", "/work"), ONE_TURN)

    def fail(*args: Any) -> None:
        raise OSError(errno.EIO, "simulated EIO")

    monkeypatch.setattr(os, "fsync", fail)
    monkeypatch.setattr(os, "ftruncate", fail)
    more, lines = build([TS(6, 2), TE(7, 2)], events)
    with pytest.raises(OSError, match="simulated EIO") as info:
        backend.append_batch(meta("s1", "/work"), more, lines, materialized=True)
    # Every fsync fails, the durable-end mark's too (issue 24, point 10): the error
    # says the session is not durable, with the original error as its cause.
    assert "to 671 bytes failed too" in str(info.value)
    assert "NOT DURABLE" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    assert any("to 671 bytes failed too" in n for n in info.value.__cause__.__notes__)


def test_append_descriptors_are_kept_and_closed(backend: JsonlBackend, root: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    monkeypatch.setattr(jsonl_ends, "MAX_OPEN_LOGS", 3)
    before = open_fds()
    logs = {f"s{i}": persist(backend, meta(f"s{i}", "/w"), ONE_TURN) for i in range(5)}
    assert open_fds() == before + 3  # the three most recently written
    for sid, events in logs.items():
        persist(backend, meta(sid, "/w"), [TS(6, 2), TE(7, 2)], events)
    assert open_fds() == before + 3
    backend.close()
    assert open_fds() == before
    assert all(seqs(backend.load_stored(s, REGISTRY)) == list(range(8)) for s in logs)


# --- §9.4 scan ----------------------------------------------------------------------------


def test_s52_a_torn_fragment_is_not_parsed() -> None:
    data = ONE_TURN_LOG + b'{"type":"assistant/chunk","seq":8,"ti'
    scan = scan_log(data, REGISTRY)
    assert seqs(scan) == [0, 1, 2, 3, 4, 5]
    assert scan.committed_bytes == len(ONE_TURN_LOG) == 671
    assert scan.jsonl == ONE_TURN_LOG[SPEC_HEADER_LEN:]


def test_s53_an_empty_line_and_a_partial_after_the_commit() -> None:
    data = X_HEADER + ts_line(0, 1) + te_line(1, 1)
    assert len(data) == 250
    data += b'\n{"partial'
    assert len(data) == 260
    scan = scan_log(data, REGISTRY)
    assert seqs(scan) == [0, 1]
    assert scan.committed_bytes == 250


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty or header-less session log"),
        (b"not json\n", "corrupt session log: header line is not valid JSON"),
        (b'{"type":"event"}\n', "corrupt session log: first line is not a session header"),
        (X_HEADER[:-1], "empty or header-less session log"),
        (b'{"type":"session","version":true,"id":"x","createdAt":1}\n',
         "corrupt session log: first line is not a session header"),
        (b'{"type":"session","version":0,"id":"x","createdAt":false}\n',
         "corrupt session log: first line is not a session header"),
        (b'{"type":"session","version":"0","id":"x","createdAt":1}\n',
         "corrupt session log: first line is not a session header"),
        (b'{"type":"session","id":"x","createdAt":1}\n',
         "corrupt session log: first line is not a session header"),
        (b'{"type":"session","version":0,"id":7,"createdAt":1}\n',
         "corrupt session log: first line is not a session header"),
        (b'[{"type":"session","version":0,"id":"x","createdAt":1}]\n',
         "corrupt session log: first line is not a session header"),
        (b'{"type":"session","version":NaN,"id":"x","createdAt":1}\n',
         "corrupt session log: header line is not valid JSON"),
    ],
)
def test_s54_scan_errors(data: bytes, message: str) -> None:
    with pytest.raises(LogFormatError) as info:
        scan_log(data, REGISTRY, path="/some/log.jsonl")
    assert str(info.value) == message
    assert info.value.path == "/some/log.jsonl"


def test_s55_a_committed_gap_is_corruption() -> None:
    data = X_HEADER + ts_line(0, 1) + step_start_line(2) + te_line(3, 1)
    with pytest.raises(LogFormatError) as info:
        scan_log(data, REGISTRY)
    assert str(info.value) == (
        "corrupt session log: seq gap in committed region at line 2 (expected 1, got 2)")
    assert info.value.line == 3  # the file line; the message names the event line


def test_s56_a_committed_unparsable_line_is_corruption() -> None:
    data = X_HEADER + b"{not json\n" + te_line(1, 1)
    with pytest.raises(LogFormatError) as info:
        scan_log(data, REGISTRY)
    assert str(info.value) == "corrupt session log: unparsable committed event at line 1"


def test_s57_a_gap_after_the_last_turn_end_is_a_torn_tail(backend: JsonlBackend,
                                                          root: Path) -> None:
    committed = X_HEADER + ts_line(0, 1) + te_line(1, 1)
    data = committed + step_start_line(9)
    scan = scan_log(data, REGISTRY)
    assert seqs(scan) == [0, 1]
    assert scan.committed_bytes == len(committed)
    write_raw(root, None, "x", data)
    assert backend.load_stored("x", REGISTRY) == StoredLog(
        SessionHeader(version=0, id="x", created_at=1), scan.events, len(committed),
        committed[len(X_HEADER):])


def test_s58_valid_lines_after_a_hole_are_torn_and_cut(backend: JsonlBackend,
                                                       root: Path) -> None:
    committed = X_HEADER + ts_line(0, 1) + te_line(1, 1)
    data = committed + b"xx\n" + (
        b'{"type":"step/start","seq":3,"time":4,"data":{"turn":2,"step":1}}\n')
    assert seqs(scan_log(data, REGISTRY)) == [0, 1]
    path = write_raw(root, None, "x", data)
    stored = backend.load_stored("x", REGISTRY)
    assert stored is not None
    assert stored.torn == len(committed)
    closers = interrupted_turn_closers(stored.events)
    assert closers == []
    backend.commit_repair(stored.header, stored.torn, closers, encode_events(closers))
    assert path.read_bytes() == committed


def test_s59_a_header_only_log(backend: JsonlBackend, root: Path) -> None:
    data = b'{"type":"session","version":0,"id":"h0","createdAt":1}\n'
    scan = scan_log(data, REGISTRY)
    assert scan.events == []
    assert scan.committed_bytes == 55 == len(data)
    write_raw(root, None, "h0", data)
    stored = backend.load_stored("h0", REGISTRY)
    assert stored is not None
    assert stored.events == []
    assert stored.torn is None


def test_s59_a_later_append_continues_at_seq_0(backend: JsonlBackend, root: Path) -> None:
    header_line = b'{"type":"session","version":0,"id":"h0","createdAt":1}\n'
    path = write_raw(root, None, "h0", header_line)
    stored = backend.load_stored("h0", REGISTRY)
    assert stored is not None
    events, lines = build(ONE_TURN)
    backend.append_batch(stored.header, events, lines, materialized=True)
    assert seqs(backend.load_stored("h0", REGISTRY)) == [0, 1, 2, 3, 4, 5]
    assert path.read_bytes() == header_line + ONE_TURN_LOG[SPEC_HEADER_LEN:]


@pytest.mark.parametrize(
    ("bad", "fatal"),
    [
        (b"", "unparsable committed event at line 2"),
        (b"   ", "unparsable committed event at line 2"),
        (b"5", "unparsable committed event at line 2"),  # not an object: a hole (§14.16)
        (b"null", "unparsable committed event at line 2"),
        (b'"turn/end"', "unparsable committed event at line 2"),
        (b'{"type":"x/y","seq":1,"time":1,"data":NaN}', "unparsable committed event at line 2"),
        # A known type: the core's stdlib fallback would read NaN; JSON.parse does not.
        (b'{"type":"step/start","seq":1,"time":NaN,"data":{"turn":1,"step":1}}',
         "unparsable committed event at line 2"),
        (b'{"type":"step/start","seq":1,"time":Infinity,"data":{"turn":1,"step":1}}',
         "unparsable committed event at line 2"),
        (b'{"type":"x/y","seq":1,"time":-Infinity,"data":{}}',
         "unparsable committed event at line 2"),
        # Two JSON values on one line: JSON.parse refuses the line.
        (step_start_line(1)[:-1] + b"," + step_start_line(2)[:-1],
         "unparsable committed event at line 2"),
        (b'{"type":"x/y","seq":true,"time":2,"data":{}}',
         "seq gap in committed region at line 2 (expected 1, got the boolean true)"),
        (b'{"type":"x/y","time":2,"data":{}}',
         "seq gap in committed region at line 2 (expected 1, got no seq)"),
        (b'{"type":"x/y","seq":null,"time":2,"data":{}}',
         "seq gap in committed region at line 2 (expected 1, got null)"),
        (b'{"type":"x/y","seq":"1","time":2,"data":{}}',
         "seq gap in committed region at line 2 (expected 1, got the string \"1\")"),
        (b'{"type":"x/y","seq":1.5,"time":2,"data":{}}',
         "seq gap in committed region at line 2 (expected 1, got 1.5)"),
    ],
)
def test_holes_and_gaps_as_javascript_sees_them(bad: bytes, fatal: str) -> None:
    before = X_HEADER + ts_line(0, 1) + bad + b"\n"
    # Before the last turn/end: corruption.
    with pytest.raises(LogFormatError) as info:
        scan_log(before + te_line(2, 1), REGISTRY)
    assert str(info.value) == f"corrupt session log: {fatal}"
    # After it: a torn tail, cut at the end of the turn/end line.
    committed = X_HEADER + ts_line(0, 1) + te_line(1, 1)
    scan = scan_log(committed + bad + b"\n" + ts_line(3, 2), REGISTRY)
    assert seqs(scan) == [0, 1]
    assert scan.committed_bytes == len(committed)


@pytest.mark.parametrize(
    "line",
    [
        # Unknown type with a lone surrogate escape: JS reads it (msgspec does not).
        b'{"type":"x/y","seq":1,"time":2,"data":{"t":"\\ud800"}}',
        # A known type with a lone surrogate escape.
        b'{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1},"x":"\\udc00"}',
        b'{"type":"step/start","seq":1.0,"time":2,"data":{"turn":1,"step":1}}',  # 1.0 === 1
        b'{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}\r',
        b'{"type":"x/y","seq":1,"time":2,"data":{"text":"NaN and Infinity"}}',
        b'{"type":"x/y","seq":1,"time":2,"data":1e999}',  # JSON.parse gives Infinity
    ],
)
def test_lines_javascript_parses_are_kept(line: bytes) -> None:
    data = X_HEADER + ts_line(0, 1) + line + b"\n" + te_line(2, 1)
    scan = scan_log(data, REGISTRY)
    assert len(scan.events) == 3
    assert scan.committed_bytes == len(data)
    assert scan.jsonl == data[len(X_HEADER):]


def test_a_line_holding_two_values_is_a_hole_even_when_seqs_run_on() -> None:
    # Decoded as one array, "{seq 1},{seq 2}" would give two events with the right seqs;
    # JSON.parse refuses the line, and the turn/end after it makes that fatal.
    two = step_start_line(1)[:-1] + b"," + step_start_line(2)
    with pytest.raises(LogFormatError) as info:
        scan_log(X_HEADER + ts_line(0, 1) + two + te_line(3, 1), REGISTRY)
    assert str(info.value) == "corrupt session log: unparsable committed event at line 2"
    scan = scan_log(X_HEADER + ts_line(0, 1) + te_line(1, 1) + two.replace(b"1", b"2"), REGISTRY)
    assert seqs(scan) == [0, 1]


def test_reference_closers_and_unknown_types_take_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closer = (
        b'{"type":"tool/result","seq":2,"time":9,"data":{"turn":1,"step":1,"callId":"c",'
        b'"content":[{"type":"text","text":"x"}],"isError":true,"error":{"name":'
        b'"InterruptedError","code":"interrupted"}},"surfaceOp":"append","sourceEventSeqs":[1]}\n'
    )
    plugin = b'{"type":"todo/write","seq":3,"time":9,"data":{"todos":[]}}\n'
    data = (X_HEADER + ts_line(0, 1) + step_start_line(1) + closer + plugin
            + step_start_line(4).replace(b"step/start", b"step/end") + te_line(5, 1))

    def no_walk(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the careful walk ran")

    monkeypatch.setattr(logfile_mod, "_careful_scan", no_walk)
    scan = scan_log(data, REGISTRY)
    assert [type(e) is OpaqueEvent for e in scan.events] == [False, False, True, True, False,
                                                             False]
    assert encode_events(scan.events) == data[len(X_HEADER):]


def test_header_extras_are_dropped_and_nulls_are_absent() -> None:
    data = (b'{"type":"session","version":0.0,"id":"x","createdAt":1.5,"cwd":null,'
            b'"seedLength":2.0,"extra":{"a":1}}\n')
    assert scan_log(data, REGISTRY).header == SessionHeader(version=0, id="x", created_at=1.5,
                                                          seed_length=2)


def test_a_header_our_struct_cannot_hold_is_refused_with_the_detail() -> None:
    data = b'{"type":"session","version":0,"id":"x","createdAt":1,"cwd":5}\n'
    with pytest.raises(LogFormatError, match=(
        r"^corrupt session log: first line is not a session header \(.*cwd")):
        scan_log(data, REGISTRY)


def _interrupted_log() -> tuple[bytes, list[Event]]:
    header = meta("s1", "/work")
    events, lines = build(ONE_TURN)
    more, more_lines = build([
        TS(6, 2),
        STEP("start", 8, turn=2),
        ("assistant/message", {"turn": 2, "step": 1, "content": [
            {"type": "text", "text": "héllo 😀 \u2028"},
            {"type": "tool-call", "id": "call-x", "name": "bash", "arguments": "{}"}]},
         9, {"surface_op": "append"}),
    ], events)
    return ENCODER.encode(header) + b"\n" + lines + more_lines, events + more


def test_a_log_cut_at_every_byte_reads_as_a_prefix() -> None:
    data, events = _interrupted_log()
    header_len = data.index(b"\n") + 1
    for cut in range(len(data) + 1):
        prefix = data[:cut]
        if cut < header_len:
            with pytest.raises(LogFormatError, match=r"^empty or header-less session log$"):
                scan_log(prefix, REGISTRY)
            continue
        scan = scan_log(prefix, REGISTRY)
        complete = prefix.count(b"\n") - 1
        assert scan.events == events[:complete], cut
        assert scan.committed_bytes == prefix.rindex(b"\n") + 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=4), st.data())
def test_a_valid_log_truncated_anywhere_never_raises(texts: list[str], data: st.DataObject
                                                     ) -> None:
    events: list[Event] = []
    lines = b""
    for n, text in enumerate(texts, start=1):
        seq = len(events)
        new, new_lines = build([
            TS(seq, n),
            ("user/message", {"content": [{"type": "text", "text": text}],
                              "source": {"kind": "user"}}, seq + 2, {"surface_op": "append"}),
            TE(seq + 2, n),
        ], events)
        events += new
        lines += new_lines
    log = X_HEADER + lines
    cut = data.draw(st.integers(min_value=len(X_HEADER), max_value=len(log)))
    scan = scan_log(log[:cut], REGISTRY)
    assert scan.events == events[: log[:cut].count(b"\n") - 1]


# --- scenario 47 (backend level): a torn tail, repaired -------------------------------------


def test_s47_torn_tail_cut_and_closed(root: Path) -> None:
    header = meta("torn", "/w")
    first = JsonlBackend(root)
    events = persist(first, header, ONE_TURN)
    events = persist(first, header, [TS(6, 2), STEP("start", 8, turn=2)], events)
    first.close()
    path = Path(log_path(root, "/w", "torn"))
    assert path.stat().st_size == 847
    with path.open("ab") as f:
        f.write(b'{"type":"assistant/chunk","seq":8,"ti')
    assert path.stat().st_size == 884

    fresh = JsonlBackend(root)
    stored = fresh.load_stored("torn", REGISTRY)
    assert stored is not None
    assert seqs(stored) == list(range(8))
    assert stored.torn == 847
    closers = interrupted_turn_closers(stored.events)
    fresh.commit_repair(stored.header, stored.torn, closers, encode_events(closers))
    assert path.stat().st_size == 998
    assert path.read_bytes().endswith(
        b'{"type":"step/end","seq":8,"time":8,"data":{"turn":2,"step":1}}\n'
        b'{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}\n'
    )
    repaired = fresh.load_stored("torn", REGISTRY)
    assert repaired is not None
    assert repaired.torn is None
    assert [e.type for e in repaired.events][-4:] == [
        "turn/start", "step/start", "step/end", "turn/end"]
    persist(fresh, header, [TS(10, 3), TE(11, 3)], repaired.events)
    assert seqs(JsonlBackend(root).load_stored("torn", REGISTRY)) == list(range(12))
    fresh.close()


def test_a_torn_marker_of_0_is_a_cut(backend: JsonlBackend, root: Path) -> None:
    path = write_raw(root, "/w", "z", ONE_TURN_LOG)
    backend.commit_repair(meta("z", "/w"), 0, [], b"")
    assert path.read_bytes() == b""
    with pytest.raises(ValueError, match="holds only 0"):
        backend.commit_repair(meta("z", "/w"), 10, [], b"")
    for marker in ("0", -1, True, 1.0):
        with pytest.raises(TypeError, match="a JSONL torn marker is a byte offset"):
            backend.commit_repair(meta("z", "/w"), marker, [], b"")


# --- scenarios 50, 51, 61: paths and fidelity -----------------------------------------------


def test_s50_a_traversal_id_stays_in_its_bucket(tmp_path: Path, root: Path,
                                                backend: JsonlBackend) -> None:
    persist(backend, meta("../../etc/pwn"), ONE_TURN)
    files = [p.relative_to(root) for p in root.rglob("*") if p.is_file()]
    assert files == [Path("_no-cwd/..~002F..~002Fetc~002Fpwn.jsonl")]
    assert [p.name for p in tmp_path.iterdir()] == ["root"]
    assert seqs(backend.load_stored("../../etc/pwn", REGISTRY)) == [0, 1, 2, 3, 4, 5]


def test_s51_chunks_round_trip(backend: JsonlBackend) -> None:
    events = persist(backend, meta("chunks", "/w"), [
        TS(0, 1),
        STEP("start", 2),
        ("assistant/chunk", {"turn": 1, "step": 1,
                             "chunk": {"type": "text-delta", "index": 0, "text": "he"}}, 3, {}),
        ("assistant/chunk", {"turn": 1, "step": 1,
                             "chunk": {"type": "text-delta", "index": 0, "text": "llo"}}, 4, {}),
        ("assistant/message", {"turn": 1, "step": 1,
                               "content": [{"type": "text", "text": "hello"}]},
         5, {"surface_op": "append", "source_event_seqs": [2, 3]}),
        STEP("end", 6),
        TE(6, 1),
    ])
    loaded = JsonlBackend(backend.root).load_stored("chunks", REGISTRY)
    assert loaded is not None
    assert loaded.events == events
    assert loaded.jsonl == encode_events(events)


def test_s61_committed_bytes_are_never_rewritten(backend: JsonlBackend, root: Path) -> None:
    events = persist(backend, meta("s1", "/work"), ONE_TURN)
    path = Path(log_path(root, "/work", "s1"))
    committed = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'\n{"partial')
    stored = JsonlBackend(root).load_stored("s1", REGISTRY)
    assert stored is not None
    assert stored.torn == 671
    backend.commit_repair(stored.header, stored.torn, [], b"")
    persist(backend, meta("s1", "/work"), [TS(6, 2), TE(7, 2)], events)
    assert path.read_bytes() == committed + ts_line(6, 2) + te_line(7, 2)


# --- loading and listing ----------------------------------------------------------------


def test_load_stored_searches_every_bucket_and_load_live_one(backend: JsonlBackend,
                                                              root: Path) -> None:
    assert backend.load_stored("x", REGISTRY) is None  # no root yet
    persist(backend, meta("x", "/projA"), ONE_TURN)
    assert seqs(backend.load_stored("x", REGISTRY)) == [0, 1, 2, 3, 4, 5]
    assert seqs(backend.load_live("x", "/projA", REGISTRY)) == [0, 1, 2, 3, 4, 5]
    assert backend.load_live("x", "/projB", REGISTRY) is None
    assert backend.load_live("x", None, REGISTRY) is None  # None is the no-cwd scope
    assert backend.load_stored("y", REGISTRY) is None
    (root / "stray-file").write_text("not a bucket")
    assert seqs(backend.load_stored("x", REGISTRY)) == [0, 1, 2, 3, 4, 5]


def test_load_stored_raises_committed_corruption(backend: JsonlBackend, root: Path) -> None:
    path = write_raw(root, "/w", "bad", X_HEADER + b"{not json\n" + te_line(1, 1))
    with pytest.raises(LogFormatError, match="unparsable committed event at line 1") as info:
        backend.load_stored("bad", REGISTRY)
    assert info.value.path == str(path)


def test_s64_list(backend: JsonlBackend, root: Path) -> None:
    persist(backend, meta("p1", "/projA"), ONE_TURN)
    persist(backend, meta("p2", "/projB"), ONE_TURN)
    persist(backend, meta("p3"), ONE_TURN)
    no_cwd = root / "_no-cwd"
    (no_cwd / "empty.jsonl").write_bytes(b"")
    (no_cwd / "notheader.jsonl").write_bytes(b'{"type":"turn/start"}\n')
    (no_cwd / "badjson.jsonl").write_bytes(b"not json at all\n")
    (no_cwd / "noline.jsonl").write_bytes(X_HEADER[:-1])
    (no_cwd / "leftover.jsonl.0123456789ab.tmp").write_bytes(X_HEADER)
    backend.acquire(meta("p3"))  # p3.lock
    # The reference skips what is not a header; we skip it too, but say so (a warning
    # per file with a complete first line; the empty and torn ones are skipped silently).
    with pytest.warns(SkippedLogWarning) as caught:
        assert sorted(h.id for h in backend.list()) == ["p1", "p2", "p3"]
    assert sorted(Path(w.message.path).name for w in caught  # type: ignore[union-attr]
                  ) == ["badjson.jsonl", "notheader.jsonl"]
    with pytest.warns(SkippedLogWarning):
        assert {h.id: h.cwd for h in backend.list()}["p1"] == "/projA"
    (no_cwd / "notheader.jsonl").unlink()
    (no_cwd / "badjson.jsonl").unlink()

    pad = b'{"type":"session","version":7,"id":"big","createdAt":1,"pad":"' + b"x" * 9000 + b'"}'
    (no_cwd / "big.jsonl").write_bytes(pad + b"\n" + ts_line(0, 1))
    assert sorted(h.id for h in backend.list()) == ["big", "p1", "p2", "p3"]
    assert [h.version for h in backend.list() if h.id == "big"] == [7]  # any version


def test_s64_list_without_a_root(tmp_path: Path) -> None:
    assert JsonlBackend(tmp_path / "absent").list() == []
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        JsonlBackend(tmp_path / "file").list()
    with pytest.raises(NotADirectoryError):
        JsonlBackend(tmp_path / "file").load_stored("x", REGISTRY)


def test_s65_a_bucket_that_is_a_file_is_an_error_not_absence(backend: JsonlBackend,
                                                             root: Path) -> None:
    root.mkdir()
    Path(session_dir(root, "/x")).write_text("in the way")
    with pytest.raises(NotADirectoryError):
        backend.load_live("exists-fault", "/x", REGISTRY)
    events, lines = build(ONE_TURN)
    with pytest.raises(FileExistsError):
        backend.append_batch(meta("exists-fault", "/x"), events, lines, materialized=False)


# --- the writer lock ------------------------------------------------------------------------


def test_a_second_writer_in_this_process_is_refused(backend: JsonlBackend,
                                                    root: Path) -> None:
    lock = backend.acquire(meta("w", "/w"))
    other = JsonlBackend(root)
    lock_file = os.path.join(session_dir(root, "/w"), "w.lock")
    with pytest.raises(SessionLockedError) as info:
        other.acquire(meta("w", "/w"))
    assert info.value.session_id == "w"
    assert info.value.holder == f"lock {lock_file}"
    assert str(info.value).startswith('session "w" is being written by another writer')
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(SessionLockedError):
        backend.acquire(meta("w", "/w"))  # the same backend: still one writer
    assert len(os.listdir("/proc/self/fd")) == fds  # a refusal keeps no descriptor
    other.acquire(meta("w", "/elsewhere")).release()  # another scope, another session
    lock.release()
    lock.release()  # idempotent
    second = other.acquire(meta("w", "/w"))
    other.close()  # releases what it holds
    backend.acquire(meta("w", "/w")).release()
    second.release()  # after close: nothing left to do


_HOLDER = textwrap.dedent("""
    import sys
    from dsh_session_core import SessionHeader
    from dsh_session_core._persistence.backends.jsonl.backend import JsonlBackend
    lock = JsonlBackend(sys.argv[1]).acquire(SessionHeader(version=0, id="w", created_at=1))
    print("locked", flush=True)
    sys.stdin.read()  # hold it until killed
""")


def test_a_writer_in_another_process_is_refused_until_it_dies(root: Path,
                                                              backend: JsonlBackend) -> None:
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"locked\n"
        with pytest.raises(SessionLockedError):
            backend.acquire(meta("w"))
    finally:
        child.kill()  # SIGKILL: no cleanup runs in the child
        child.wait()
        for stream in (child.stdin, child.stdout):
            assert stream is not None
            stream.close()
    assert child.returncode == -9
    backend.acquire(meta("w")).release()


# --- helpers' own checks --------------------------------------------------------------------


def test_the_line_builders_match_the_spec_bytes() -> None:
    # ts_line/te_line are hand-written from §13's TS/TE; check them against §9.2's log.
    lines = ONE_TURN_LOG.split(b"\n")
    assert ts_line(0, 1) == lines[1] + b"\n"
    assert te_line(5, 1) == lines[6] + b"\n"
    assert step_start_line(2) == lines[3] + b"\n"

