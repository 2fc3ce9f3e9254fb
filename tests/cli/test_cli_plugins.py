"""Issue acceptance for the plugins: what `dsh-session events`, `validate` and `plugins`
show with the in-repo plugins installed (the test suite's third-party example plugin is
blocked here, as any plugin can be)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from conftest import UPSTREAM

TESTS = Path(__file__).resolve().parents[1]  # the whole suite
SNAPSHOT = "packages/support/acp-snapshot/"

# The seed catalog (shared/seeds/002): 22 types, their owners and surface badges; and
# core's two retention ledger types, which are not the reference's (docs/retention.md).
SEED_CATALOG = {
    "assistant/chunk": ("core", False), "assistant/message": ("core", True),
    "compact/end": ("compact", False), "compact/start": ("compact", False),
    "compact/summary": ("compact", False), "context/message": ("core", True),
    "hook/invoked": ("hooks", False), "hook/result": ("hooks", False),
    "mode/set": ("mode", False), "prompt/blocked": ("core", False),
    "request/header": ("core", False), "request/header-delta": ("core", False),
    "retention/abandoned": ("core", False), "retention/mark": ("core", False),
    "retention/removal": ("core", False), "retention/removing": ("core", False),
    "retention/forgetting": ("core", False),
    "retention/forgotten": ("core", False),
    "steering/message": ("core", True), "step/end": ("core", False),
    "step/start": ("core", False), "todo/write": ("todo", False),
    "tool/call": ("core", False), "tool/code-dispatch": ("core", False),
    "tool/result": ("core", True), "turn/end": ("core", False),
    "turn/start": ("core", False), "user/message": ("core", True),
}


#: Plugins the test environment installs beside the batteries' four: the tests' example
#: third-party plugin, and the framework integrations (workspace members that are not
#: part of the batteries). The seed catalog is the batteries'.
NOT_BATTERIES = "example,adk,claude-agent,langgraph,openai-agents,pydantic-ai"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSH_SESSION_DISABLE_PLUGINS": NOT_BATTERIES}
    return subprocess.run([sys.executable, "-m", "dsh_session_core", *args],
                          capture_output=True, text=True, check=False, env=env)


def test_events_lists_exactly_the_seed_catalog() -> None:
    proc = _cli("events", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = msgspec.json.decode(proc.stdout)["events"]
    assert {r["type"]: (r["plugin"], r["surface"]) for r in rows} == SEED_CATALOG
    assert all(r["doc"] and r["payload"] for r in rows)


def test_plugins_lists_the_four_in_repo_plugins_the_viewer_and_the_demo() -> None:
    rows = {r["name"]: r for r in msgspec.json.decode(_cli("plugins", "--json").stdout)}
    assert set(rows) == {"core", "compact", "hooks", "mode", "todo", "view", "demo"}
    # The viewer and the demo add commands only (view, export --html; demo).
    assert rows["view"]["hooks"] == rows["demo"]["hooks"] == ["register_commands"]
    assert rows["view"]["event_types"] == rows["demo"]["event_types"] == []
    for name in ("compact", "hooks", "mode", "todo"):
        assert rows[name]["distribution"] == f"dsh-session-{name}"
        assert "register_event_types" in rows[name]["hooks"]
    assert rows["compact"]["event_types"] == ["compact/end", "compact/start", "compact/summary"]
    assert "add_hookspecs" in rows["compact"]["hooks"]


def _fixture_logs() -> list[Path]:
    root = UPSTREAM / "fixtures"
    return sorted(root.rglob("*.jsonl")) if root.is_dir() else []


def test_validate_strict_accepts_every_recorded_reference_log(upstream: Path) -> None:
    logs = [p for p in _fixture_logs() if SNAPSHOT not in str(p)]
    assert len(logs) == 43
    proc = _cli("validate", "--strict", *map(str, logs))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("43 of 43 logs valid (strict: unknown event types, "
                                        "opaque payloads and unanswered tool calls are "
                                        "errors)")


@pytest.mark.parametrize(("name", "seq", "etype", "plugin", "path"), [
    ("authored-error", 1, "turn/end", "core", "$.data"),
    ("blocked-log", 1, "hook/result", "hooks", "$.data"),
    ("pin-turn", 1, "turn/start", "core", "$.data"),
])
def test_validate_strict_rejects_the_hand_written_breakage(
    upstream: Path, name: str, seq: int, etype: str, plugin: str, path: str
) -> None:
    log = UPSTREAM / "fixtures" / SNAPSHOT / "tests/fixtures/suite" / name / "session.jsonl"
    proc = _cli("validate", "--strict", str(log))
    assert proc.returncode == 1
    assert f": seq {seq} {etype} (plugin '{plugin}'): " in proc.stdout
    assert f" at {path}" in proc.stdout


def test_validate_json_and_unknown_types(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    log.write_text('{"type":"session","version":0,"id":"x","createdAt":1}\n'
                   '{"type":"elsewhere/thing","seq":0,"time":1,"data":{}}\n')
    lenient = msgspec.json.decode(_cli("validate", "--json", str(log)).stdout)
    assert lenient["ok"] is True
    strict = _cli("validate", "--strict", "--json", str(log))
    assert strict.returncode == 1
    assert "no installed plugin declares it" in msgspec.json.decode(strict.stdout)["problems"][0]


def test_every_plugin_scenario_has_a_test() -> None:
    # plugins-persistence.md §13: 1-71 persistence, 72-90 plugins.
    named: set[int] = set()
    for path in TESTS.rglob("test_*.py"):
        named.update(int(n) for n in re.findall(r"def test_s(\d+)_", path.read_text()))
    plugins = set(range(72, 91))
    assert sorted(plugins - named) == []


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_events_wraps_its_docs_to_the_terminal_width(
    columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_session_core.testing import run_cli

    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "example")
    code, out, err = run_cli("events")
    assert (code, err) == (0, "")
    lines = out.decode().splitlines()
    # Only a word longer than the doc column overflows it (words are never cut).
    over = [line for line in lines if len(line) > columns and len(line.split()) > 1
            and not line.startswith(" ")]
    over += [line for line in lines if len(line) > columns and line.startswith(" ")
             and len(line.split()) > 1]
    assert over == [], over
    # Nothing lost: the docs joined back are the registry's, type by type.
    from dsh_session_core._cli.support import registry
    from dsh_session_core._schema.catalog import event_rows

    text = " ".join(line.strip() for line in lines)
    for row in event_rows(registry()):
        assert " ".join(row["doc"].split()) in " ".join(text.split()), row["type"]
