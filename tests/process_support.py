"""Running a snippet of Python in a fresh interpreter of this environment, for the tests
that check what a process loads or prints (start-up cost, what a command imports), or
that talk to another process line by line (a writer of another process, waiting for a
lock: :func:`line_worker`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

__all__ = ["ask", "line_worker", "python_prints"]


def python_prints(code: str, **env: str) -> str:
    """What ``python -c code`` prints on stdout (stripped), with ``env`` added to the
    environment; a failing snippet fails the test with its stderr."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@contextlib.contextmanager
def line_worker(code: str, *args: str, timeout: float = 120) -> Iterator[subprocess.Popen[str]]:
    """``python -c code *args`` running, once it printed ``ready``; ended after the block
    (its stdin closed: it ends), and checked to have exited 0."""
    with subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline() == "ready\n"
            yield proc
        finally:
            _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err


def ask(proc: subprocess.Popen[str], line: str) -> str:
    """Send ``line`` to a :func:`line_worker` and return its answer (one line)."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()
