"""The real ``dsh-session`` command in a child process, for the tests that must watch it
run (a follow, an interrupt): its pipes read with deadlines, never with sleeps."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import IO

__all__ = ["RUN", "Pipe", "command_env", "running"]

#: The command, as ``python -c`` runs it (the console script's own entry).
RUN = "from dsh_session_core._cli.main import main; main()"


def command_env(**extra: str) -> dict[str, str]:
    """This environment without ``NO_COLOR`` and with the test suite's example plugin
    blocked (its type would show in listings), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["DSH_SESSION_DISABLE_PLUGINS"] = "example"
    env.update(extra)
    return env


class Pipe:
    """Lines from a child's pipe, read with a deadline (no sleeping)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.fd = stream.fileno()
        self.buffer = b""

    def _read(self, left: float) -> bytes | None:
        """What the pipe has within ``left`` seconds: bytes, ``b""`` at its end, or
        ``None`` when nothing came in time."""
        ready, _, _ = select.select([self.fd], [], [], max(left, 0))
        return os.read(self.fd, 65536) if ready else None

    def until(self, needle: bytes, within: float = 60) -> bytes:
        """Everything read up to the end of the first line holding ``needle``; fails at
        the deadline or at the end of the stream."""
        deadline = time.monotonic() + within
        while True:
            head, found, _ = self.buffer.partition(needle)
            if found:
                end = self.buffer.find(b"\n", len(head)) + 1 or len(self.buffer)
                taken, self.buffer = self.buffer[:end], self.buffer[end:]
                return taken
            left = deadline - time.monotonic()
            assert left > 0, f"no {needle!r} in {self.buffer!r}"
            chunk = self._read(left)
            assert chunk != b"", f"the stream ended before {needle!r}: {self.buffer!r}"
            self.buffer += chunk or b""

    def lines(self, count: int, within: float) -> list[bytes]:
        """Up to ``count`` whole lines (without their newlines): fewer when the deadline
        or the end of the stream comes first."""
        deadline = time.monotonic() + within
        while self.buffer.count(b"\n") < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            chunk = self._read(left)
            if chunk == b"":
                break
            self.buffer += chunk or b""
        *lines, self.buffer = self.buffer.split(b"\n")
        taken, rest = lines[:count], lines[count:]
        self.buffer = b"".join(line + b"\n" for line in rest) + self.buffer
        return taken

    def rest(self) -> bytes:
        """What is left, to the end of the stream (the child has exited)."""
        while chunk := os.read(self.fd, 65536):
            self.buffer += chunk
        taken, self.buffer = self.buffer, b""
        return taken


@contextlib.contextmanager
def running(*argv: str) -> Iterator[tuple[subprocess.Popen[bytes], Pipe, Pipe]]:
    """``dsh-session ARGV`` running, with its stdout and stderr; killed (if still
    running) and reaped on the way out."""
    proc = subprocess.Popen([sys.executable, "-c", RUN, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=command_env())
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        yield proc, Pipe(proc.stdout), Pipe(proc.stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
