"""Regressions of issue 11 (reliability under faults and hostile input), one per defect:
a double fault (a failed write whose rollback fails too) never makes the log unloadable;
a failed crash repair does not keep the writer lock; no write follows a symbolic link;
a renamed log is refused at open and left out of a listing with a warning; the temp
files of killed first writes are swept; a failed flush names its session and its log; a
header id with a lone surrogate gets one verdict from every reader."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import os
import re
import signal
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from persist_support import Factory

from dsh_session_core import JsonlBackend, Session, create_plugin_manager
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.errors import (
    DshSessionError,
    LinkedLogError,
    MisplacedLogError,
    PersistenceError,
    SkippedLogWarning,
    StoreWriteError,
)
from dsh_session_core.testing import user_turn


def _store(root: Path | Any) -> DurableStore:
    backend = root if not isinstance(root, Path) else JsonlBackend(root)
    return DurableStore(backend, create_plugin_manager(autoload=False), clock=lambda: 1)


def _bucket(root: Path, cwd: str = "/w") -> Path:
    return root / ("cwd-" + hashlib.sha256(cwd.encode()).hexdigest()[:12])


def _log(root: Path, sid: str, cwd: str = "/w") -> Path:
    return _bucket(root, cwd) / f"{sid}.jsonl"


def _turn(s: Session, turn: int, *, end: bool = True) -> None:
    user_turn(s, turn, f"q{turn}", end=end)


def _durable_then_pending(root: Path, session_id: str) -> tuple[DurableStore, Session]:
    """A store whose new session holds turn 1 flushed (durable) and turn 2 appended but
    not flushed: the next flush is the batch a test makes fail."""
    st = _store(root)
    s = st.create(session_id, cwd="/w")
    _turn(s, 1)
    st.flush(s)
    _turn(s, 2)
    return st, s


def _fail(monkeypatch: pytest.MonkeyPatch, name: str, times: int = 1,
          *, half: bool = False) -> list[int]:
    """Make the next ``times`` calls of ``os.<name>`` fail (a write writes half its bytes
    first, when ``half``); the list counts the failures."""
    real = getattr(os, name)
    failed: list[int] = []

    def fake(*args: Any, **kwargs: Any) -> Any:
        if len(failed) < times:
            failed.append(1)
            if half and name == "write":
                real(args[0], bytes(args[1][: max(len(args[1]) // 2, 1)]))
            raise OSError(errno.EIO, f"injected {name} EIO")
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, fake)
    return failed


def _fail_on_path(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
                  matches: Callable[[str], bool], error: Callable[[str], OSError], *,
                  once: bool = False) -> None:
    """Make ``owner.<name>(path, ...)`` raise ``error(path)`` for the paths ``matches``
    accepts (only the first such call, when ``once``); every other call goes through."""
    real = getattr(owner, name)
    failed: list[str] = []

    def fake(path: Any, *args: Any, **kwargs: Any) -> Any:
        if matches(str(path)) and not (once and failed):
            failed.append(str(path))
            raise error(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(owner, name, fake)


def _reload_lines(root: Path, sid: str) -> list[bytes]:
    stored = _store(root).persistence.backend.load_stored(sid, _store(root).registry)
    assert stored is not None
    assert stored.jsonl is not None
    return stored.jsonl.splitlines()


# --- 1. a double fault never makes the log unloadable --------------------------------------


@pytest.mark.parametrize(("call", "half"), [("fsync", False), ("write", True)],
                         ids=["fsync-then-ftruncate", "half-write-then-ftruncate"])
def test_a_failed_rollback_is_cut_before_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, half: bool
) -> None:
    st, s = _durable_then_pending(tmp_path, "dbl")
    committed = _log(tmp_path, "dbl").read_bytes()  # turn 2 is not written yet
    _fail(monkeypatch, call, half=half)
    _fail(monkeypatch, "ftruncate")
    with pytest.raises(OSError, match=f"injected {call} EIO"):
        st.flush(s)
    monkeypatch.undo()
    assert _log(tmp_path, "dbl").read_bytes() != committed  # the batch's bytes stayed
    st.flush(s)  # the retry cuts them first, then writes the batch once
    st.close()
    assert _reload_lines(tmp_path, "dbl") == s.jsonl().splitlines()
    assert [e.seq for e in _store(tmp_path).open("dbl").events] == list(range(6))


def test_a_rollback_failing_again_on_the_retry_leaves_a_loadable_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st, s = _durable_then_pending(tmp_path, "dbl")
    _fail(monkeypatch, "fsync")
    _fail(monkeypatch, "ftruncate", times=2)
    with pytest.raises(OSError, match="injected fsync EIO"):
        st.flush(s)
    with pytest.raises(OSError, match="injected ftruncate EIO") as info:
        st.flush(s)  # the cut fails again: refused, nothing appended
    assert "nothing is appended to it until they are cut" in str(info.value)
    monkeypatch.undo()
    st.persistence.backend.close()  # a process that dies here
    # The leftover is the batch itself (written, not fsynced): never acknowledged, so
    # never history (issue 24, point 10: the durable-end mark cuts it).
    assert [e.seq for e in _store(tmp_path).open("dbl").events] == list(range(3))


def test_a_log_changed_after_a_failed_rollback_is_refused_not_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st, s = _durable_then_pending(tmp_path, "dbl")
    _fail(monkeypatch, "fsync")
    _fail(monkeypatch, "ftruncate")
    with pytest.raises(OSError, match="injected fsync EIO"):
        st.flush(s)
    monkeypatch.undo()
    path = _log(tmp_path, "dbl")
    with path.open("r+b") as f:  # someone cut it inside the last durable line
        f.truncate(len(path.read_bytes().splitlines(keepends=True)[0]) + 10)
    before = path.read_bytes()
    with pytest.raises(PersistenceError, match="is not as its writer left it") as info:
        st.flush(s)
    assert info.value.session_id == "dbl"
    assert "open the session again" in str(info.value)
    assert path.read_bytes() == before


def test_a_first_write_published_but_not_withdrawn_is_finished_by_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_session_core._persistence.backends.jsonl import files as files_mod

    st = _store(tmp_path)
    s = st.create("pub", cwd="/w")
    _turn(s, 1)
    bucket = str(_bucket(tmp_path))
    _fail_on_path(monkeypatch, files_mod, "fsync_dir", lambda path: path == bucket,
                  lambda _: OSError(errno.EIO, "injected directory fsync EIO"))
    _fail(monkeypatch, "unlink")
    with pytest.raises(OSError, match="injected directory fsync EIO"):
        st.flush(s)
    monkeypatch.undo()
    _turn(s, 2)  # the retry's batch holds more than the published one
    st.flush(s)
    st.close()
    assert _reload_lines(tmp_path, "pub") == s.jsonl().splitlines()


# --- 2. a failed crash repair does not keep the writer lock ------------------------------


class _RepairFailsOnce:
    """Wraps a backend: its first ``commit_repair`` raises."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.failures = 1

    def commit_repair(self, *args: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EIO, "injected repair EIO")
        self.inner.commit_repair(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _crashed(storage: Factory, sid: str) -> None:
    """A stored session whose last turn never ended."""
    st = _store(storage())
    s = st.create(sid, cwd="/w")
    _turn(s, 1)
    _turn(s, 2, end=False)
    st.close()


def test_a_failed_repair_releases_the_writer_lock(storage: Factory) -> None:
    _crashed(storage, "rep")
    st = _store(_RepairFailsOnce(storage()))
    with pytest.raises(OSError, match="injected repair EIO") as info:
        st.open("rep")
    assert isinstance(info.value, StoreWriteError)
    s = st.open("rep")  # the retry, same store: not SessionLockedError
    assert [e.type for e in s.events][-1] == "turn/end"
    st.close()
    assert [e.seq for e in _store(storage()).persistence.load("rep").events] == list(range(6))


def test_a_failed_repair_lets_another_writer_in(storage: Factory) -> None:
    _crashed(storage, "rep")
    st = _store(_RepairFailsOnce(storage()))
    with pytest.raises(OSError, match="injected repair EIO"):
        st.open("rep")
    other = _store(storage())  # another store (another process, for file locks)
    other.open("rep")
    other.close()


@pytest.mark.parametrize("call", ["open", "ftruncate", "fsync", "write"])
def test_a_jsonl_repair_failing_at_any_call_can_be_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    root = tmp_path / "root"
    st = _store(root)
    s = st.create("rep", cwd="/w")
    _turn(s, 1)
    _turn(s, 2, end=False)
    st.flush(s)
    st.close()
    with _log(root, "rep").open("ab") as f:
        f.write(b'{"type":"turn/end","se')  # a torn tail: the repair cuts, then closes
    st = _store(root)
    if call == "open":
        _fail_on_path(monkeypatch, os, "open", lambda path: path.endswith(".jsonl"),
                      lambda _: OSError(errno.EIO, "injected open EIO"), once=True)
    else:
        _fail(monkeypatch, call, half=True)
    with pytest.raises(OSError, match="injected"):
        st.open("rep")
    monkeypatch.undo()
    s = st.open("rep")
    assert [e.type for e in s.events][-1] == "turn/end"
    st.close()
    assert [e.seq for e in _store(root).open("rep").events] == list(range(6))


# --- 8. no write follows a symbolic link ------------------------------------------------


def _outside_log(tmp_path: Path) -> Path:
    """A crashed log outside the store (its last turn open)."""
    st = _store(tmp_path / "elsewhere")
    s = st.create("lnk", cwd="/w")
    _turn(s, 1)
    _turn(s, 2, end=False)
    st.close()
    return _log(tmp_path / "elsewhere", "lnk")


def test_open_refuses_a_log_that_is_a_link_out_of_the_store(tmp_path: Path) -> None:
    target = _outside_log(tmp_path)
    before = target.read_bytes()
    root = tmp_path / "root"
    _bucket(root).mkdir(parents=True)
    _log(root, "lnk").symlink_to(target)
    st = _store(root)
    with pytest.raises(LinkedLogError) as info:
        st.open("lnk")
    assert info.value.path == str(_log(root, "lnk"))
    assert info.value.target == str(target)
    assert "replace the link with the file itself" in str(info.value)
    assert target.read_bytes() == before
    st.close()


def test_open_refuses_a_bucket_that_is_a_link_out_of_the_store(tmp_path: Path) -> None:
    target = _outside_log(tmp_path)
    before = target.read_bytes()
    root = tmp_path / "root"
    root.mkdir()
    _bucket(root).symlink_to(target.parent)
    st = _store(root)
    with pytest.raises(LinkedLogError, match="symbolic link"):
        st.open("lnk")
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["lnk.jsonl", "lnk.lock"]
    st.close()


def test_a_first_write_refuses_a_dangling_link(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _bucket(root).mkdir(parents=True)
    outside = tmp_path / "outside.jsonl"
    _log(root, "new").symlink_to(outside)
    st = _store(root)
    with pytest.raises(LinkedLogError):
        st.create("new", cwd="/w")
    assert not outside.exists()
    st.close()


def test_a_lock_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _bucket(root).mkdir(parents=True)
    outside = tmp_path / "outside.lock"
    (_bucket(root) / "new.lock").symlink_to(outside)
    st = _store(root)
    with pytest.raises(LinkedLogError):
        st.create("new", cwd="/w")
    assert not outside.exists()
    st.close()


def _cli(*argv: str) -> tuple[int, str, str]:
    from dsh_session_core._cli.main import main

    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as info:
        main(list(argv))
    out.flush()
    code = info.value.code
    stdout = out.buffer.getvalue().decode()
    return code if isinstance(code, int) else 1, stdout, err.getvalue()


def test_cli_repair_refuses_a_link(tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
                                   ) -> None:
    target = _outside_log(tmp_path)
    before = target.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    code, _, err = _cli("repair", str(link))
    assert code == 1
    assert f"through the symbolic link {link} to {target}" in err
    assert f"hint: repair the file itself: dsh-session repair {target}" in err
    assert target.read_bytes() == before
    assert not (tmp_path / "link.lock").exists()


def test_cli_repair_failing_to_write_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _outside_log(tmp_path)
    _fail(monkeypatch, "fsync")
    code, _, err = _cli("repair", str(path))
    monkeypatch.undo()
    assert code == 1
    assert "the repair failed: injected fsync EIO" in err
    assert "Traceback" not in err
    assert _cli("repair", str(path))[0] == 0  # the retry starts over from the disk
    assert [e.type for e in _store(tmp_path / "elsewhere").open("lnk").events][-1] == (
        "turn/end")


# --- 9. a renamed or moved log is refused at open and at listing --------------------------


def _renamed(root: Path) -> Path:
    st = _store(root)
    s = st.create("a", cwd="/w")
    _turn(s, 1)
    st.close()
    renamed = _log(root, "b")
    _log(root, "a").rename(renamed)
    return renamed


def test_a_renamed_log_is_refused_at_open_with_the_fix(tmp_path: Path) -> None:
    renamed = _renamed(tmp_path)
    before = renamed.read_bytes()
    st = _store(tmp_path)
    with pytest.raises(MisplacedLogError) as info:
        st.open("b")
    assert info.value.path == str(renamed)
    assert info.value.session_id == "a"
    assert info.value.expected == str(_log(tmp_path, "a"))
    assert f"mv {renamed} {_log(tmp_path, 'a')}" in str(info.value)
    assert renamed.read_bytes() == before
    with pytest.raises(MisplacedLogError):
        st.create("b", cwd="/w")  # a live session over it: the same refusal
    st.close()


def test_a_renamed_log_is_left_out_of_a_listing_with_a_warning(tmp_path: Path) -> None:
    renamed = _renamed(tmp_path)
    st = _store(tmp_path)
    other = st.create("c", cwd="/w")
    _turn(other, 1)
    st.flush(other)
    with pytest.warns(SkippedLogWarning, match='holds session "a"') as caught:
        assert [h.id for h in st.stored()] == ["c"]  # one bad file hides nothing else
    assert caught[0].message.path == str(renamed)  # type: ignore[union-attr]
    assert caught[0].filename == __file__  # attributed to the caller, not the library
    with pytest.warns(SkippedLogWarning, match="mv "):
        assert [s.header.id for s in st.backend.summaries()] == ["c"]
    st.close()


def test_a_file_whose_first_line_is_not_a_header_is_left_out_with_a_warning(
    tmp_path: Path
) -> None:
    bucket = _bucket(tmp_path)
    bucket.mkdir()
    (bucket / "junk.jsonl").write_bytes(b'{"type":"turn/start"}\n')
    (bucket / "torn.jsonl").write_bytes(b'{"type":"sess')  # no complete line: silent
    with pytest.warns(SkippedLogWarning, match="junk.jsonl left out .*not a session header"
                      ) as caught:
        assert _store(tmp_path).stored() == []
    assert len(caught) == 1


def test_a_log_moved_to_another_bucket_is_refused(tmp_path: Path) -> None:
    st = _store(tmp_path)
    s = st.create("m", cwd="/w")
    _turn(s, 1)
    st.close()
    moved = _log(tmp_path, "m", cwd="/other")
    moved.parent.mkdir()
    _log(tmp_path, "m").rename(moved)
    with pytest.raises(MisplacedLogError, match="a renamed or moved file"):
        _store(tmp_path).open("m")


def test_cli_ls_lists_the_rest_and_warns_of_a_renamed_log_in_one_line(
    tmp_path: Path
) -> None:
    renamed = _renamed(tmp_path)
    st = _store(tmp_path)
    other = st.create("c", cwd="/w")
    _turn(other, 1)
    st.close()
    code, out, err = _cli("ls", "--store", str(tmp_path))
    assert code == 0
    assert "c" in out.split()
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"dsh-session: warning: {renamed} left out of the listing")
    assert f"mv {renamed} {_log(tmp_path, 'a')}" in lines[0]
    assert "Traceback" not in err


# --- 11. temp files of killed first writes are swept ------------------------------------


def _killed_first_write(root: Path, sid: str) -> Path:
    """Fork a writer killed between writing its temp file and publishing it."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.link = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
            st = _store(root)
            s = st.create(sid, cwd="/w")
            _turn(s, 1)
            st.flush(s)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    temps = list(_bucket(root).glob(f"{sid}.jsonl.*.tmp"))
    assert len(temps) == 1
    assert not _log(root, sid).exists()
    return temps[0]


def test_a_killed_first_writes_temp_is_swept_when_its_session_is_next_written(
    tmp_path: Path
) -> None:
    temp = _killed_first_write(tmp_path, "k")
    st = _store(tmp_path)
    s = st.create("k", cwd="/w")
    assert not temp.exists()
    _turn(s, 1)
    st.close()
    assert sorted(p.name for p in _bucket(tmp_path).iterdir()) == ["k.jsonl", "k.lock"]


def test_listing_sweeps_temps_but_never_one_a_live_writer_holds(tmp_path: Path) -> None:
    dead = _killed_first_write(tmp_path, "dead")
    live = _killed_first_write(tmp_path, "live")
    held = os.open(_bucket(tmp_path) / "live.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # a live writer of "live" (its temp is in use)
    try:
        assert _store(tmp_path).stored() == []
        assert not dead.exists()
        assert live.exists()
    finally:
        os.close(held)
    assert _store(tmp_path).stored() == []
    assert not live.exists()


def test_a_temp_without_a_lock_file_is_left_alone(tmp_path: Path) -> None:
    # Not a writer of ours (every one makes the lock file first): maybe a live one.
    _bucket(tmp_path).mkdir(parents=True)
    temp = _bucket(tmp_path) / "x.jsonl.0123456789ab.tmp"
    temp.write_bytes(b"{}")
    assert _store(tmp_path).stored() == []
    assert temp.exists()


# --- 11. a failed flush names its session and its log ------------------------------------


def test_a_failed_flush_is_a_persistence_error_naming_the_session_and_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st, s = _durable_then_pending(tmp_path, "named")
    _fail(monkeypatch, "fsync")
    with pytest.raises(StoreWriteError) as info:
        st.flush(s)
    monkeypatch.undo()
    exc = info.value
    assert isinstance(exc, PersistenceError)
    assert isinstance(exc, OSError)
    assert isinstance(exc, DshSessionError)
    assert exc.session_id == "named"
    assert exc.path == str(_log(tmp_path, "named"))
    assert exc.errno == errno.EIO
    assert exc.args == (errno.EIO, "injected fsync EIO")
    assert isinstance(exc.__cause__, OSError)
    assert not isinstance(exc.__cause__, StoreWriteError)
    message = str(exc)
    assert 'flushing session "named"' in message
    assert str(_log(tmp_path, "named")) in message
    assert "injected fsync EIO" in message
    assert "flush again" in message
    st.flush(s)
    st.close()


def test_a_failed_first_write_names_the_file_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = _store(tmp_path)
    s = st.create("first", cwd="/w")
    _turn(s, 1)
    _fail_on_path(monkeypatch, os, "open", lambda path: path.endswith(".tmp"),
                  lambda path: OSError(errno.EACCES, "Permission denied", path))
    with pytest.raises(StoreWriteError, match=r"\(at .*first\.jsonl\.[0-9a-f]{12}\.tmp\)"):
        st.flush(s)
    monkeypatch.undo()
    st.close()


def test_a_failed_fork_flush_is_one_cli_line(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    st = _store(tmp_path)
    s = st.create("parent", cwd="/w")
    _turn(s, 1)
    st.close()
    _fail(monkeypatch, "fsync", times=100)
    code, _, err = _cli("fork", "parent", "--store", str(tmp_path), "--at", "2", "--as", "kid")
    monkeypatch.undo()
    assert code == 1
    assert "Traceback" not in err
    assert "injected fsync EIO" in err




def test_an_error_closing_an_evicted_descriptor_does_not_fail_a_durable_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_session_core._persistence.backends.jsonl import ends as jsonl_ends

    monkeypatch.setattr(jsonl_ends, "MAX_OPEN_LOGS", 1)
    st = _store(tmp_path)
    a, b = st.create("a", cwd="/w"), st.create("b", cwd="/w")
    for turn, s in enumerate((b, a), 1):
        _turn(s, turn)
        st.flush(s)  # a's descriptor is kept, b's closed
    _fail(monkeypatch, "close")  # closing a's, when b's write evicts it, fails
    _turn(b, 3)
    st.flush(b)  # durable: not reported failed (a retry would write its seqs again)
    monkeypatch.undo()
    _turn(b, 4)
    st.flush(b)
    st.close()
    assert _reload_lines(tmp_path, "b") == b.jsonl().splitlines()


# --- 11. a header id with a lone surrogate: every reader gives one verdict ---------------

_SURROGATE_HEADER = b'{"type":"session","version":0,"id":"a\\ud800b","createdAt":0}\n'
_SURROGATE_VERDICT = "the header's id 'a\\ud800b' holds a lone surrogate (U+D800)"


@pytest.mark.parametrize("argv", [
    ("derive",), ("derive", "--recover"), ("validate",), ("validate", "--strict"),
    ("repair",), ("repair", "--dry-run"), ("export",), ("show",), ("stats",),
])
def test_a_header_id_with_a_lone_surrogate_is_refused_by_every_command_alike(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    # Before, derive refused it (msgspec's "unexpected end of escaped utf-16 surrogate
    # pair") while derive --recover, repair and store.open accepted it.
    log = tmp_path / "s.jsonl"
    log.write_bytes(_SURROGATE_HEADER + b'{"type":"turn/start","seq":0}\n')
    before = log.read_bytes()
    code, out, err = _cli(*argv, str(log))
    assert code == 1
    assert _SURROGATE_VERDICT in (out if argv[0] == "validate" else err)  # its report
    assert "Traceback" not in out + err
    if argv[0] != "validate":  # no crash tail, no --recover: the fix is a copy
        assert "hint: the header (line 1) is not a crash tail" in err
    assert log.read_bytes() == before


def test_a_stored_log_whose_header_id_has_a_lone_surrogate_is_refused_at_open(
    tmp_path: Path
) -> None:
    st = _store(tmp_path)
    s = st.create("ab", cwd="/w")
    _turn(s, 1)
    st.close()
    log = _log(tmp_path, "ab")
    log.write_bytes(log.read_bytes().replace(b'"id":"ab"', b'"id":"a\\ud800b"'))
    before = log.read_bytes()
    st = _store(tmp_path)
    with pytest.raises(DshSessionError, match=re.escape(_SURROGATE_VERDICT)):
        st.open("ab")
    with pytest.warns(SkippedLogWarning, match=re.escape(_SURROGATE_VERDICT)):
        assert st.stored() == []
    st.close()
    assert log.read_bytes() == before


def test_a_json_header_missing_a_field_is_named_as_no_header_not_as_bad_json(
    tmp_path: Path
) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(b'{"type":"session","version":0,"createdAt":0}\n')
    code, _, err = _cli("derive", str(log))
    assert code == 1
    assert "first line is not a session header (Object missing required field `id`)" in err
    assert "not valid JSON" not in err


# --- issue 39: a failed write that could mark nothing: its writer's reads stop there --------


def test_the_writers_reads_stop_where_its_load_does_when_no_mark_could_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch is written, then its fsync, the rollback and the durable-end mark all
    # fail: only this backend knows the history ends before the batch. Its loads stopped
    # there; its reads (read, tail, and so a projection's tail fold) read the failed
    # batch's lines as history, and the projection served rows of a batch never written.
    from projection_support import NAME, assert_rows_are_the_fold, plugins

    st = DurableStore(JsonlBackend(tmp_path), plugins(True), clock=lambda: 1)
    s = st.create("unmarked", cwd="/w")
    _turn(s, 1)
    st.flush(s)
    _turn(s, 2)
    for call in ("fsync", "ftruncate", "open", "rename", "link", "unlink", "mkdir"):
        _fail(monkeypatch, call, times=100)
    with pytest.raises(StoreWriteError, match="injected fsync EIO"):
        st.flush(s)
    monkeypatch.undo()
    assert [e.seq for e in st.read("unmarked")] == [0, 1, 2]
    assert [e.seq for e in st.tail("unmarked", 2)] == [1, 2]
    assert assert_rows_are_the_fold(st, "unmarked") == {"u00000001": "q1"}
    assert st.projection("unmarked", NAME).covers == 3
    st.flush(s)  # the retry cuts the failed batch, then writes it once
    assert list(assert_rows_are_the_fold(st, "unmarked")) == ["u00000001", "u00000004"]
    st.close()
