"""The code stays typed and lint-clean: mypy --strict and ruff run as part of the suite,
so CI fails on a type or lint error like on any other broken test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_mypy_strict_is_clean() -> None:
    proc = _run("mypy")  # src, tests and bench, as pyproject.toml says
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_is_clean() -> None:
    proc = _run("ruff", "check", "src", "tests", "bench", "dev.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
