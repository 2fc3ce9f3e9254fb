"""Set up and run dsh-session from a fresh clone, with nothing but Python 3.11+ and pip.

    python3 dev.py demo     # the main job
    python3 dev.py test     # the whole test suite, a worker per core (pytest arguments
                            # may follow; -n 0 or -p no:xdist runs it in one process)

The repository is a workspace of eleven distributions (docs/layout.md): the seven
batteries (``dsh-session-core``, the four plugins and the viewer under ``packages/``, and
``dsh-session`` at the root: the demo, and the others as dependencies) and the four
framework integrations under ``packages/``. Each command keeps its own virtual
environment, made on first use and reinstalled only when a ``pyproject.toml`` changed:

- ``demo`` uses ``.venv``: the seven batteries as a user gets them from
  ``pip install dsh-session``, and nothing else (no linter, no test-only plugin);
- ``test`` uses ``.venv-test``: the same, plus the integrations, the PostgreSQL extra,
  the ``test`` dependency group of ``pyproject.toml`` and the tests' example third-party
  plugin.

The workspace is installed editable, so a change to the code needs no reinstall. Where
``venv`` is unavailable, it installs into the running interpreter instead.

The PostgreSQL tests use the server at ``DSH_SESSION_TEST_POSTGRESQL`` if it is set;
otherwise ``test`` starts a throwaway server with ``tests/pgserver.py`` for the run (when
the PostgreSQL server binaries are installed; without them those tests skip). The
viewer's browser tests (``tests/view``) drive Debian's ``chromium`` through its
``chromedriver`` (``apt-get install chromium chromium-driver``); without them they skip.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
ENVIRONMENTS = {"demo": ROOT / ".venv", "test": ROOT / ".venv-test"}
PGSERVER = ROOT / "tests" / "pgserver.py"
PG_ENV = "DSH_SESSION_TEST_POSTGRESQL"


def _python(env: Path) -> Path:
    bindir = "Scripts" if os.name == "nt" else "bin"
    return env / bindir / ("python.exe" if os.name == "nt" else "python")


def _workspace() -> tuple[list[str], list[str]]:
    """The workspace members (folders, in dependency order) and the test dependencies,
    as the root ``pyproject.toml`` lists them."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        config = tomllib.load(f)
    members: list[str] = config["tool"]["dsh-session"]["workspace"]["members"]
    tests: list[str] = config["dependency-groups"]["test"]
    return members, tests


def _integrations() -> list[str]:
    """The integrations with third-party frameworks (folders): tested, not batteries."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        config = tomllib.load(f)
    found: list[str] = config["tool"]["dsh-session"]["workspace"].get("integrations", [])
    return found


def _requirements(purpose: str) -> list[str]:
    """What ``pip install`` gets for an environment: every member editable (core with
    its PostgreSQL extra for the tests); for the tests, then the integrations, the test
    group and the example plugin."""
    members, tests = _workspace()
    if purpose == "test":
        members = [*members[:-1], *_integrations(), members[-1]]  # the root stays last
    args: list[str] = []
    for member in members:
        path = str(ROOT / member)
        if purpose == "test" and member.endswith("dsh-session-core"):
            path += "[postgresql]"
        args += ["-e", path]
    if purpose == "test":
        args += tests
        example = ROOT / "tests" / "example_plugin"
        if example.is_dir():
            args += ["-e", str(example)]
    return args


def _digest(purpose: str) -> str:
    """What the environment was installed from: every pyproject.toml it reads."""
    h = hashlib.sha256(purpose.encode())
    for path in sorted(ROOT.glob("packages/*/pyproject.toml")):
        h.update(path.read_bytes())
    h.update((ROOT / "pyproject.toml").read_bytes())
    example = ROOT / "tests" / "example_plugin" / "pyproject.toml"
    if purpose == "test" and example.is_file():
        h.update(example.read_bytes())
    return h.hexdigest()


def _environment(purpose: str) -> str:
    """The interpreter to run with, set up and up to date."""
    env = ENVIRONMENTS[purpose]
    python = _python(env)
    if not python.exists():
        try:
            venv.EnvBuilder(with_pip=True).create(env)
        except Exception as exc:  # e.g. Debian without python3-venv
            print(f"dev.py: no virtual environment ({exc}); using {sys.executable}")
            python = Path(sys.executable)
    stamp = env / ".installed"
    digest = _digest(purpose)
    if python != Path(sys.executable) and stamp.exists() and stamp.read_text() == digest:
        return str(python)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         *_requirements(purpose)],
        check=True,
    )
    if env.exists():
        stamp.write_text(digest)
    return str(python)


def _pgserver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PGSERVER), *args], capture_output=True,
                          text=True, check=False)


def _workers(args: list[str]) -> list[str]:
    """pytest-xdist's arguments: a worker per core (``-n auto``), tests handed to the
    worker that is free (``--dist worksteal``: a few tests take far longer than the
    rest), unless the arguments already say how to run (``-n``, ``-p no:xdist``)."""
    told = any(a in ("-n", "--numprocesses", "--dist") or a.startswith(("-n", "--numprocesses="))
               or a in ("no:xdist", "-pno:xdist") for a in args)
    return [] if told else ["-n", "auto", "--dist", "worksteal"]


def _test(python: str, args: list[str]) -> int:
    """Run pytest, with a throwaway PostgreSQL server unless one is given."""
    pytest = [python, "-m", "pytest", *_workers(args), *args]
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        print("dev.py: no chromium or chromedriver, the browser tests will skip "
              "(apt-get install chromium chromium-driver)")
    if os.environ.get(PG_ENV):
        return subprocess.run(pytest, cwd=ROOT).returncode
    check = _pgserver("check")
    if check.returncode != 0:
        print(f"dev.py: no PostgreSQL server binaries, the PostgreSQL tests will skip "
              f"(apt-get install postgresql, or set {PG_ENV}=postgresql://...)")
        return subprocess.run(pytest, cwd=ROOT).returncode
    # Under /tmp, not in the checkout: as root the server runs as another user, who must
    # be able to reach the directory.
    directory = tempfile.mkdtemp(prefix="dsh-session-pg-")
    try:
        start = _pgserver("start", directory)
        if start.returncode != 0:
            print(start.stderr.rstrip(), file=sys.stderr)
            print(f"dev.py: could not start a PostgreSQL server (or set {PG_ENV})",
                  file=sys.stderr)
            return 1
        env = {**os.environ, PG_ENV: start.stdout.strip()}
        # Stop the server on Ctrl-C or kill too (pg_ctl detached it from our signals).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        return subprocess.run(pytest, cwd=ROOT, env=env).returncode
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    finally:
        stop = _pgserver("stop", directory)
        if stop.returncode != 0:
            print(f"dev.py: {stop.stderr.rstrip()}", file=sys.stderr)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print(__doc__)
        return 2
    python = _environment(argv[0])
    if argv[0] == "test":
        return _test(python, argv[1:])
    cli = [python, "-m", "dsh_session_core"]
    return subprocess.run([*cli, "demo", *argv[1:]], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
