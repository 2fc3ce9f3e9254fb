"""Startup cost of the ``dsh-session`` command and of ``import dsh_session_core``.

Each figure is the median wall time of a fresh process, against ``python -c pass`` on
the same interpreter, measured in the same run and interleaved with it, so the
difference holds from machine to machine. The target (issue 10): ``dsh-session --help``
within 25 ms of ``python -c pass``.

    python bench/startup.py                     # the environment of this interpreter
    python bench/startup.py --bin DIR           # another one's bin/ (a wheel install)
    python bench/startup.py --json

Plugins: the figures are those of the project's own distributions. The test
environment's example third-party plugin (``example``) is blocked, as the docs' commands
block it: with a plugin that is not the project's installed, ``--help`` loads the plugins
to ask them for their commands (docs/decisions.md, "Commands other distributions add"),
which ``help_third_party_ms`` measures where one is installed.

Bytecode: an environment installed from wheels has its ``.pyc`` files compiled by pip;
an editable one writes them on first import, unless ``PYTHONDONTWRITEBYTECODE`` is set,
which this benchmark unsets so that the figures are those a user sees.

This is a benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec

LIMIT_MS = 25.0


def _time(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env, check=True)
    return (time.perf_counter() - start) * 1000


#: The test environment's third-party plugin (tests/example_plugin).
THIRD_PARTY = "example"


def _has_third_party(python: str, env: dict[str, str]) -> bool:
    code = ("from dsh_session_core._plugins.entry_points import find_entry_points\n"
            f"print(any(e.name == {THIRD_PARTY!r} "
            "for e in find_entry_points('dsh_session.plugins')))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    return out.stdout.strip() == "True"


def measure(bindir: Path, rounds: int) -> dict[str, float]:
    """Median milliseconds of each command, the rounds interleaved."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "DSH_SESSION_DISABLE_PLUGINS")}
    python = str(bindir / "python")
    commands = {
        "python_pass_ms": [python, "-c", "pass"],
        "help_ms": [str(bindir / "dsh-session"), "--help"],
        "import_ms": [python, "-c", "import dsh_session_core"],
        "version_ms": [str(bindir / "dsh-session"), "--version"],
    }
    envs = {name: {**env, "DSH_SESSION_DISABLE_PLUGINS": THIRD_PARTY} for name in commands}
    if _has_third_party(python, env):
        commands["help_third_party_ms"] = commands["help_ms"]
        envs["help_third_party_ms"] = env
    for name, cmd in commands.items():  # warm: caches, bytecode
        _time(cmd, envs[name])
    runs: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, cmd in commands.items():
            runs[name].append(_time(cmd, envs[name]))
    return {name: statistics.median(values) for name, values in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", type=Path, default=Path(sys.executable).parent,
                        help="the bin/ folder of the environment to measure")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.bin, args.rounds)
    over = figures["help_ms"] - figures["python_pass_ms"]
    result = {
        **{k: round(v, 1) for k, v in figures.items()},
        "targets": {"help_over_python_ms": {"value": round(over, 1), "limit": LIMIT_MS,
                                            "op": "<="}},
    }
    if args.json:
        sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
        return
    print(f"environment: {args.bin}")
    print(f"python -c pass              {figures['python_pass_ms']:7.1f} ms")
    print(f"dsh-session --help          {figures['help_ms']:7.1f} ms")
    print(f"python -c 'import dsh_session_core' {figures['import_ms']:5.1f} ms")
    print(f"dsh-session --version       {figures['version_ms']:7.1f} ms")
    if "help_third_party_ms" in figures:
        print(f"dsh-session --help, with a third party's plugin "
              f"{figures['help_third_party_ms']:.1f} ms (its plugins loaded)")
    verdict = "ok" if over <= LIMIT_MS else "OVER"
    print(f"--help over python -c pass  {over:7.1f} ms (limit {LIMIT_MS:.0f} ms: {verdict})")


if __name__ == "__main__":
    main()
