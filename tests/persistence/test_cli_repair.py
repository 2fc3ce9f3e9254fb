"""``dsh-session repair`` and ``derive --recover`` on a crashed JSONL log (spec scenario
47's bytes: the log is 847 bytes, a torn fragment makes it 884, the repair 998)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import msgspec
from persist_support import ONE_TURN, TS

HEADER = b'{"type":"session","version":0,"id":"torn","createdAt":1000,"cwd":"/w"}\n'
STEP = {"type": "step/start", "seq": 7, "time": 8, "data": {"turn": 2, "step": 1}}
FRAGMENT = b'{"type":"assistant/chunk","seq":8,"ti'
CLOSERS = (b'{"type":"step/end","seq":8,"time":8,"data":{"turn":2,"step":1}}\n'
           b'{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}\n')


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_session_core", *args],
                          capture_output=True, text=True, check=False)


def _crashed(tmp_path: Path) -> Path:
    lines = [msgspec.json.encode(e) + b"\n" for e in [*ONE_TURN, TS(6, 2, time=7), STEP]]
    path = tmp_path / "torn.jsonl"
    path.write_bytes(HEADER + b"".join(lines))
    assert path.stat().st_size == 847
    with path.open("ab") as f:
        f.write(FRAGMENT)
    assert path.stat().st_size == 884
    return path


def test_dry_run_says_what_it_would_do_and_changes_nothing(tmp_path: Path) -> None:
    path = _crashed(tmp_path)
    before = path.read_bytes()
    proc = _cli("repair", "--dry-run", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "would cut a torn tail of 37 byte(s)" in proc.stdout
    assert "would close the interrupted turn with step/end (seq 8), turn/end (seq 9)" in (
        proc.stdout)
    assert path.read_bytes() == before


def test_repair_cuts_the_tail_and_closes_the_turn(tmp_path: Path) -> None:
    path = _crashed(tmp_path)
    proc = _cli("repair", str(path))
    assert proc.returncode == 0, proc.stderr
    data = path.read_bytes()
    assert len(data) == 998
    assert data.endswith(CLOSERS)
    again = _cli("repair", str(path))
    assert "nothing to repair (10 events, last turn closed)" in again.stdout
    assert path.read_bytes() == data


def test_derive_recover_applies_the_same_rules_without_writing(tmp_path: Path) -> None:
    path = _crashed(tmp_path)
    torn = _cli("derive", str(path))
    assert torn.returncode == 1  # read as is, the torn line is an error
    proc = _cli("derive", "--recover", str(path))
    assert proc.returncode == 0, proc.stderr
    messages = msgspec.json.decode(proc.stdout)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert path.stat().st_size == 884


def test_repair_refuses_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    path = _crashed(tmp_path)
    fd = os.open(tmp_path / "torn.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = _cli("repair", str(path))
    finally:
        os.close(fd)
    assert proc.returncode == 1
    assert "a writer holds this session's lock" in proc.stderr
    assert path.stat().st_size == 884
