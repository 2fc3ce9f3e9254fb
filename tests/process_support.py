"""Running a snippet of Python in a fresh interpreter of this environment, for the tests
that check what a process loads or prints (start-up cost, what a command imports)."""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["python_prints"]


def python_prints(code: str, **env: str) -> str:
    """What ``python -c code`` prints on stdout (stripped), with ``env`` added to the
    environment; a failing snippet fails the test with its stderr."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
