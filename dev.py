"""Set up and run dsh-session from a fresh clone, with nothing but Python 3.11+ and pip.

    python3 dev.py demo     # the main job
    python3 dev.py test     # the whole test suite (pytest arguments may follow)

The first run makes a virtual environment in ``.venv`` and installs the project with its
test dependencies into it; later runs reinstall only when ``pyproject.toml`` changed.
Where ``venv`` is unavailable, it installs into the running interpreter instead.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"


def _python() -> Path:
    bindir = "Scripts" if os.name == "nt" else "bin"
    return VENV / bindir / ("python.exe" if os.name == "nt" else "python")


def _environment() -> str:
    """The interpreter to run with, set up and up to date."""
    python = _python()
    if not python.exists():
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except Exception as exc:  # e.g. Debian without python3-venv
            print(f"dev.py: no virtual environment ({exc}); using {sys.executable}")
            python = Path(sys.executable)
    stamp = VENV / ".installed"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if python != Path(sys.executable) and stamp.exists() and stamp.read_text() == digest:
        return str(python)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-e", f"{ROOT}[test]"],
        check=True,
    )
    example = ROOT / "tests" / "example_plugin"
    if example.is_dir():
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-deps", "-e", str(example)],
            check=True,
        )
    if VENV.exists():
        stamp.write_text(digest)
    return str(python)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print(__doc__)
        return 2
    python = _environment()
    if argv[0] == "test":
        return subprocess.run([python, "-m", "pytest", *argv[1:]], cwd=ROOT).returncode
    cli = [python, "-m", "dsh_session_core"]
    return subprocess.run([*cli, "demo", *argv[1:]], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
