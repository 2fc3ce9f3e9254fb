"""Every code example in docs/ runs: the docs cannot go stale.

- ```python blocks of a page run top to bottom in one namespace, in a temporary folder
  with its own data directory (so the embedded default store lands there);
- ```console blocks hold ``$ command`` lines, each followed by its expected output
  (a line ``...`` matches any lines); ``dsh-session`` runs this checkout's CLI;
- a block preceded by ``<!-- file: PATH -->`` must equal that file of the repository.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"(?:<!-- file: (?P<file>[^ ]+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```",
                   re.S)


def _pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def _blocks(page: Path) -> list[tuple[str, str, str | None]]:
    return [(m["lang"], m["body"], m["file"]) for m in FENCE.finditer(page.read_text())]


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("DSH_SESSION_STORE", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def _matches(expected: list[str], actual: list[str]) -> bool:
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(_matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and _matches(expected[1:], actual[1:])


def _run_console(body: str, cwd: Path) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in body.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    for command, expected in commands:
        argv = shlex.split(command)
        if argv[0] == "dsh-session":
            argv = [sys.executable, "-m", "dsh_session_core", *argv[1:]]
        # Commands show what a user of the batteries sees: the test suite's example
        # plugin and the framework integrations (installed for their own tests) are
        # blocked.
        env = {**os.environ,
               "DSH_SESSION_DISABLE_PLUGINS":
                   "example,adk,claude-agent,langgraph,openai-agents,pydantic-ai",
               "TZ": "UTC"}
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False,
                              env=env)
        actual = (proc.stdout + proc.stderr).rstrip("\n").split("\n")
        assert _matches(expected, actual if proc.stdout or proc.stderr else []), (
            f"$ {command}\n--- expected\n" + "\n".join(expected) + "\n--- got\n"
            + "\n".join(actual))


#: A page that names it gets a fresh database of the PostgreSQL test server under it.
PG_EXAMPLE = "DSH_SESSION_EXAMPLE_POSTGRESQL"
#: A page that names it gets a store of its own on the Redis test server under it.
REDIS_EXAMPLE = "DSH_SESSION_EXAMPLE_REDIS"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_examples_run(
    page: Path, sandbox: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if PG_EXAMPLE in page.read_text():
        monkeypatch.setenv(PG_EXAMPLE, request.getfixturevalue("postgresql_url"))
    if REDIS_EXAMPLE in page.read_text():
        monkeypatch.setenv(REDIS_EXAMPLE, request.getfixturevalue("redis_url"))
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for lang, body, file in _blocks(page):
        if file is not None:
            assert body == (ROOT / file).read_text(), f"{page.name}: {file} differs"
        elif lang == "python":
            exec(compile(body, f"{page.name}", "exec"), namespace)
        elif lang == "console":
            _run_console(body, sandbox)


@pytest.mark.parametrize("name", ["cli.md", "retention.md", "encryption.md", "testing.md",
                                  "search.md", "view.md", "projections.md", "erasing.md",
                                  "claude-agent.md", "langgraph.md", "openai-agents.md",
                                  "adk.md", "pydantic-ai.md", "backends.md", "hooks.md",
                                  "writing-a-plugin.md", "inspect.md"])
def test_store_examples_run_again_in_the_same_folder(
    name: str, sandbox: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 37: a reader runs a page twice in one folder, as printed (its code and its
    # commands); the second run finds its sessions stored and opens them
    # (open_or_create, as SessionExistsError advises) and prints what the page shows.
    page = DOCS / name
    if PG_EXAMPLE in page.read_text():
        monkeypatch.setenv(PG_EXAMPLE, request.getfixturevalue("postgresql_url"))
    if REDIS_EXAMPLE in page.read_text():
        monkeypatch.setenv(REDIS_EXAMPLE, request.getfixturevalue("redis_url"))
    for _ in range(2):
        namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
        for lang, body, file in _blocks(page):
            if file is not None:
                continue  # a file of a project the page shows, not code to run
            if lang == "python":
                exec(compile(body, page.name, "exec"), namespace)
            elif lang == "console":
                _run_console(body, sandbox)


def test_the_redis_example_runs_twice_as_printed(
    sandbox: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 41: a new user runs the Redis section's example as printed, twice, on one
    # server: the second run finds the first one's session there and makes its own.
    page = (DOCS / "backends.md").read_text()
    section = page[page.index("\n## Redis"):]
    section = section[:section.index("\n## ", 1)]
    blocks = [m["body"] for m in FENCE.finditer(section) if m["lang"] == "python"]
    assert len(blocks) == 1
    monkeypatch.setenv(REDIS_EXAMPLE, request.getfixturevalue("redis_url"))
    for _ in range(2):
        exec(compile(blocks[0], "backends.md", "exec"), {"__name__": "docs.backends"})
