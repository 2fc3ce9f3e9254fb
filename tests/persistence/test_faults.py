"""Faults and bad input on real files (JSONL, the embedded default): a failed write or
fsync leaves the file at its last committed byte and a retry writes no duplicate; bad
logs give a clear error (naming the line) or a safe encoding, and nothing is lost or
overwritten. Where a store is written, it also runs with the contract projection kept
(``projecting``): its rows, read by the writer and by a fresh store, are the fold of the
log as loaded after the fault and after the retry."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from projection_support import assert_rows_are_the_fold, plugins

from dsh_session_core import JsonlBackend, create_plugin_manager, open_store
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.errors import LogFormatError
from dsh_session_core.testing import user_turn


def _store(root: Path, projecting: bool = False) -> DurableStore:
    return DurableStore(JsonlBackend(root), plugins(projecting))


@pytest.fixture(params=[False, True], ids=["no-projection", "projecting"])
def projecting(request: pytest.FixtureRequest) -> bool:
    """Whether the store keeps the contract projection (its rows in the sidecar)."""
    return bool(request.param)


def _log(root: Path, sid: str, cwd: str = "/w") -> Path:
    return root / ("cwd-" + hashlib.sha256(cwd.encode()).hexdigest()[:12]) / f"{sid}.jsonl"


@pytest.mark.parametrize("call", ["write", "fsync"])
def test_a_failed_write_leaves_the_last_committed_byte_and_a_retry_no_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, projecting: bool
) -> None:
    st = _store(tmp_path, projecting)
    s = st.create("enospc", cwd="/w")
    user_turn(s, 1)
    st.flush(s)
    path = _log(tmp_path, "enospc")
    committed = path.read_bytes()
    user_turn(s, 2)
    real = getattr(os, call)
    calls = {"n": 0}

    def failing(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args)

    monkeypatch.setattr(os, call, failing)
    with pytest.raises(OSError, match="No space left"):
        st.flush(s)
    monkeypatch.setattr(os, call, real)
    assert path.read_bytes() == committed
    fresh = functools.partial(_store, tmp_path, projecting)
    if projecting:  # the failed batch left no row: turn 1's alone
        assert list(assert_rows_are_the_fold(st, "enospc", fresh=fresh)) == ["u00000001"]
    st.flush(s)  # the retry: the same seqs, once
    if projecting:
        assert len(assert_rows_are_the_fold(st, "enospc", fresh=fresh)) == 2
    st.close()
    events = _store(tmp_path).persistence.load("enospc").events
    assert [e.seq for e in events] == list(range(6))


def _write(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))


HEADER = b'{"type":"session","version":0,"id":"bad","createdAt":1,"cwd":"/w"}'
TS = (b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":'
      b'{"kind":"message","source":{"kind":"user"}}}}')
TE = b'{"type":"turn/end","seq":%d,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}'


@pytest.mark.parametrize(("lines", "message"), [
    ([HEADER, b"{not json", TE % 1], "unparsable committed event at line 1"),
    ([HEADER, TS[:-20] + b"\xff\xfe" + TS[-20:], TE % 1], "unparsable committed event at line 1"),
    ([HEADER, TS, TE % 2], "seq gap in committed region at line 2 (expected 1, got 2)"),
    ([HEADER[:30]], "header line is not valid JSON"),
], ids=["corrupt-line", "invalid-utf8", "seq-gap", "truncated-header"])
def test_committed_corruption_is_a_clear_error_and_changes_nothing(
    tmp_path: Path, lines: list[bytes], message: str
) -> None:
    path = _log(tmp_path, "bad")
    _write(path, lines)
    before = path.read_bytes()
    st = _store(tmp_path)
    with pytest.raises(LogFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        st.open("bad")
    assert path.read_bytes() == before


def test_invalid_utf8_after_the_last_turn_is_a_torn_tail(tmp_path: Path,
                                                         projecting: bool) -> None:
    path = _log(tmp_path, "bad")
    _write(path, [HEADER, TS, TE % 1, b'{"type":"turn/start","seq":2,"time":1,\xff}'])
    st = _store(tmp_path, projecting)
    s = st.open("bad")
    assert [e.seq for e in s.events] == [0, 1]
    if projecting:
        assert_rows_are_the_fold(st, "bad", fresh=functools.partial(_store, tmp_path, True))
    st.close()
    assert path.read_bytes().endswith((TE % 1) + b"\n")


def test_a_50_mb_line_is_stored_and_read_back(tmp_path: Path) -> None:
    big = "x" * (50 * 1024 * 1024)
    st = _store(tmp_path)
    s = st.create("big", cwd="/w")
    user_turn(s, 1, text=big)
    st.flush(s)
    st.close()
    again = _store(tmp_path).open("big")
    assert again.events[1].data.content[0].text == big


def test_a_traversal_id_stays_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    st = _store(root)
    s = st.create("../../etc/passwd")
    user_turn(s, 1)
    st.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(root in p.parents for p in files)
    assert (root / "_no-cwd" / "..~002F..~002Fetc~002Fpasswd.jsonl").is_file()
    assert [e.seq for e in _store(root).open("../../etc/passwd").events] == [0, 1, 2]


def test_open_store_defaults_to_jsonl_in_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with open_store(plugin_manager=create_plugin_manager(autoload=False)) as st:
        assert isinstance(st.backend, JsonlBackend)
        s = st.create("d", cwd="/w")
        user_turn(s, 1)
    assert (tmp_path / "data" / "dsh-session" / "sessions").is_dir()
    assert any((tmp_path / "data" / "dsh-session" / "sessions").rglob("d.jsonl"))


def test_the_store_url_picks_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_session_core import MemoryBackend, SqliteBackend

    pm = create_plugin_manager(autoload=False)
    monkeypatch.setenv("DSH_SESSION_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    with open_store(plugin_manager=pm) as st:
        assert isinstance(st.backend, SqliteBackend)
    with open_store(f"sqlite:///{tmp_path / 'x.db'}", plugin_manager=create_plugin_manager(
            autoload=False)) as st:
        assert isinstance(st.backend, SqliteBackend)
        assert st.backend.path == str(tmp_path / "x.db")  # four slashes: one absolute path
    with open_store("memory:", plugin_manager=create_plugin_manager(autoload=False)) as st:
        assert isinstance(st.backend, MemoryBackend)
    with open_store(tmp_path / "folder", plugin_manager=create_plugin_manager(
            autoload=False)) as st:
        assert isinstance(st.backend, JsonlBackend)
    with pytest.raises(ValueError, match="unknown store URL scheme 'ftp'"):
        open_store("ftp://x", plugin_manager=create_plugin_manager(autoload=False))
