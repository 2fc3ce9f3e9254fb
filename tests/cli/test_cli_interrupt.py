"""Ctrl-C exits 130 in every command (``copy`` of a large store, ``tail -f``), and
``tail -F`` waits for a session (or a store, or a log file) that does not exist yet while
``tail -f`` refuses it. Each runs the real command in a subprocess, and waits on what it
prints, never on a sleep."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_session_core._codec import ENCODER
from dsh_session_core._persistence.paths import log_path
from lifecycle_support import Clock, opened, store_url, write

RUN = "from dsh_session_core._cli.main import main; main()"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["DSH_SESSION_DISABLE_PLUGINS"] = "example"
    return env


class _Pipe:
    """Lines from a child's pipe, read with a deadline (no sleeping)."""

    def __init__(self, stream: Any) -> None:
        self.fd = stream.fileno()
        self.buffer = b""

    def until(self, needle: bytes, within: float = 60) -> bytes:
        """Everything read up to the first line holding ``needle``; fails at the
        deadline or at the end of the stream."""
        deadline = time.monotonic() + within
        while True:
            head, found, _ = self.buffer.partition(needle)
            if found:
                end = self.buffer.find(b"\n", len(head)) + 1 or len(self.buffer)
                taken, self.buffer = self.buffer[:end], self.buffer[end:]
                return taken
            left = deadline - time.monotonic()
            assert left > 0, f"no {needle!r} in {self.buffer!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 65536)
                assert chunk, f"the stream ended before {needle!r}: {self.buffer!r}"
                self.buffer += chunk

    def rest(self) -> bytes:
        """What is left, to the end of the stream (the child has exited)."""
        while chunk := os.read(self.fd, 65536):
            self.buffer += chunk
        taken, self.buffer = self.buffer, b""
        return taken


@contextlib.contextmanager
def _command(*argv: str) -> Iterator[tuple[subprocess.Popen[bytes], _Pipe, _Pipe]]:
    proc = subprocess.Popen([sys.executable, "-c", RUN, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        yield proc, _Pipe(proc.stdout), _Pipe(proc.stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _interrupt(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=60)


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
    with _command("copy", str(tmp_path / "big"), destination) as (proc, out, err):
        out.until(b": copied 9 event(s)")  # copying: one session is done
        assert _interrupt(proc) == 130
        stderr = err.rest().decode()
        assert "interrupted: the sessions and batches already copied are kept" in stderr
        assert "hint: run the same command again to resume" in stderr
        assert "Traceback" not in stderr


def test_ctrl_c_stops_tail_f_with_130(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    clock = Clock()
    with opened(url, clock) as store:
        write(store, clock, "s")
    with _command("tail", "-f", "-n", "1", "s", "--store", url) as (proc, out, err):
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
    subprocess.run([sys.executable, "-c", _CREATE, url, session_id], check=True, env=_env())


@pytest.mark.parametrize("kind", ["jsonl", "jsonl+zstd", "sqlite", "postgresql"])
def test_tail_F_waits_for_a_session_made_later_and_prints_it_whole(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)  # no store yet: -F waits for it too
    with _command("tail", "-F", "-n", "2", "--json", "later", "--store", url) as (
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
                          capture_output=True, text=True, env=_env(), timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f'dsh-session: no session "later" in {url}')


def test_tail_F_of_an_existing_session_follows_it_as_tail_f(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    _create_in_another_process(url, "s")
    with _command("tail", "-F", "-n", "1", "--json", "s", "--store", url) as (proc, out, err):
        assert json.loads(out.until(b"\n"))["seq"] == 5  # -n 1: the last event only
        assert _interrupt(proc) == 130
        assert err.rest() == b""


def test_tail_F_waits_for_a_log_file(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    with _command("tail", "-F", "--json", "--file", str(path)) as (proc, out, err):
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
