"""The OpenAI Agents SDK's own session tests, unmodified, with ``DshSession`` in place of
their sessions (``sdk_plugin.py``), on JSONL and SQLite, in the default mode and kept
open (``keep_open=True``), next to a stock run of the same files.

The sdist of ``openai-agents`` 0.24.0 is downloaded from the package index with pip into
``.cache/openai-agents-sdist/`` (gitignored, never part of the repository) and extracted
there, with the one test-only dependency those files need (``pytest-asyncio``: their
``asyncio_mode = "auto"``) installed into a folder beside it, on the subprocess's path
only, so that this suite's own pytest never loads it. Offline after the first run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "openai-agents-sdist"
VERSION = "0.24.0"
PYTEST_ASYNCIO = "pytest-asyncio==1.5.0"
FILES = [
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_session_context_wrapper.py",
    "tests/test_hitl_session_scenario.py",
    "tests/deferred_session_writes/",
]
#: The stock run of FILES on this version: every test passes.
STOCK_PASSED = 248
EXCLUSIONS = HERE / "sdk_exclusions.txt"


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check",
                           *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"pip {' '.join(args)} failed:\n{done.stderr[-2000:]}")


@pytest.fixture(scope="module")
def sdk_source() -> Path:
    """The extracted sdist and its test dependency, downloaded once."""
    source = CACHE / f"openai_agents-{VERSION}"
    deps = CACHE / "deps"
    sdist = CACHE / f"openai_agents-{VERSION}.tar.gz"
    if not sdist.is_file():
        _pip("download", "--quiet", "--no-binary", ":all:", "--no-deps",
             f"openai-agents=={VERSION}", "-d", str(CACHE))
    if not (source / "tests" / "memory" / "test_session.py").is_file():
        with tarfile.open(sdist) as tar:
            tar.extractall(CACHE, filter="data")
    if not (deps / "pytest_asyncio").is_dir():
        _pip("install", "--quiet", "--no-deps", "--target", str(deps), PYTEST_ASYNCIO)
    return source


def _run(source: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, int]:
    paths = [str(CACHE / "deps"), str(HERE)]
    environ = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, *FILES],
        cwd=source, env=environ, capture_output=True, text=True, check=False, timeout=600)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|errors?|deselected|"
                                               r"skipped)", summary)}
    counts["returncode"] = done.returncode
    made = re.search(r"sdk_plugin: DshSession substitutes: keep_open=(\d+) default=(\d+)",
                     done.stdout)
    if made:
        counts["made_keep_open"], counts["made_default"] = map(int, made.groups())
    print(summary)
    if done.returncode not in (0, 1):
        pytest.fail(done.stdout[-4000:] + done.stderr[-4000:])
    return counts


def _excluded() -> list[str]:
    names = [line.split("#")[0].strip() for line in EXCLUSIONS.read_text().splitlines()]
    return [n for n in names if n]


@pytest.mark.parametrize("keep_open", [False, True], ids=["default", "keep_open"])
@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_their_session_tests_pass_with_dsh_session(
    sdk_source: Path, store: str, keep_open: bool
) -> None:
    counts = _run(sdk_source, "-p", "sdk_plugin",
                  env={"DSH_OA_STORE": store, "DSH_OA_DESELECT": str(EXCLUSIONS),
                       "DSH_OA_KEEP_OPEN": "1" if keep_open else "0"})
    assert counts.get("failed", 0) == 0, counts
    assert counts.get("deselected") == len(_excluded()) == 17
    assert counts["passed"] == STOCK_PASSED - 17 == 231
    assert counts["returncode"] == 0
    # The substitutes ran, all in the mode asked for.
    made = counts["made_keep_open"] if keep_open else counts["made_default"]
    assert made > 100
    assert counts["made_default" if keep_open else "made_keep_open"] == 0


def test_the_stock_run_of_the_same_files(sdk_source: Path) -> None:
    counts = _run(sdk_source)
    assert counts == {"passed": STOCK_PASSED, "returncode": 0}
