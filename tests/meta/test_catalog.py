"""The generated event catalog (spec plugins-persistence §11, scenario 90): generated
from the live registry, committed, and checked for freshness by CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from msgspec import Struct

from dsh_session_core import Event, EventSpec, PluginManager, SessionStore, hookimpl
from dsh_session_core.errors import PluginError

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "docs" / "persistence-catalog.md"


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # The catalog documents the batteries' packages; the test suite's third-party example
    # plugin and the framework integrations (dsh-session-adk, dsh-session-claude-agent,
    # dsh-session-langgraph, dsh-session-openai-agents, dsh-session-pydantic-ai: workspace
    # members outside the batteries) are installed too, and are blocked here like any
    # plugin can be.
    env = {**os.environ, "DSH_SESSION_DISABLE_PLUGINS":
           "example,adk,claude-agent,langgraph,openai-agents,pydantic-ai"}
    return subprocess.run([sys.executable, "-m", "dsh_session_core", *args],
                          capture_output=True, text=True, check=False, cwd=cwd, env=env)


def test_s90_the_committed_catalog_is_fresh() -> None:
    proc = _cli("events", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout


def test_s90_regenerating_gives_the_committed_bytes(tmp_path: Path) -> None:
    proc = _cli("events", "--markdown")
    assert proc.stdout == CATALOG.read_text(encoding="utf-8")


def test_s90_one_changed_character_makes_it_stale(tmp_path: Path) -> None:
    text = CATALOG.read_text(encoding="utf-8")
    stale = tmp_path / "catalog.md"
    stale.write_text(text.replace("surface", "surfacE", 1), encoding="utf-8")
    proc = _cli("events", "--check", str(stale))
    assert proc.returncode == 1
    assert "is stale" in proc.stderr
    missing = _cli("events", "--check", str(tmp_path / "absent.md"))
    assert missing.returncode == 1


class _Data(Struct, frozen=True):
    n: int


class _Undocumented(Event, tag="test/undocumented-a", frozen=True):
    data: _Data


class _AlsoUndocumented(Event, tag="test/undocumented-b", frozen=True):
    data: _Data


class _Plugin:
    def __init__(self, *specs: EventSpec) -> None:
        self.specs = specs

    @hookimpl
    def register_event_types(self) -> tuple[EventSpec, ...]:
        return self.specs


def test_s90_an_undocumented_type_fails_the_build_naming_it(pm: PluginManager) -> None:
    pm.register(_Plugin(EventSpec(_Undocumented)), name="quiet")
    with pytest.raises(PluginError, match=r"'test/undocumented-a' \(plugin 'quiet'\)"):
        SessionStore(pm)


def test_s90_two_undocumented_types_give_one_aggregated_error(pm: PluginManager) -> None:
    pm.register(_Plugin(EventSpec(_Undocumented), EventSpec(_AlsoUndocumented)), name="quiet")
    with pytest.raises(PluginError, match=r"^2 event type\(s\) without a doc line") as info:
        SessionStore(pm)
    assert "test/undocumented-a" in str(info.value)
    assert "test/undocumented-b" in str(info.value)


def test_the_schema_export_covers_every_type() -> None:
    import msgspec

    rows = msgspec.json.decode(_cli("events", "--json").stdout)["events"]
    schema = msgspec.json.decode(_cli("events", "--schema").stdout)
    assert sorted(schema["events"]) == sorted(r["type"] for r in rows)
    turn_end = schema["events"]["turn/end"]["data"]
    assert turn_end == {"$ref": "#/$defs/TurnEndData"}
    assert schema["$defs"]["TurnEndData"]["required"] == ["turn", "reason"]


# --- the vocabulary reference (issue 12) ---------------------------------------------------

VOCABULARY = ROOT / "docs" / "vocabulary.md"


def test_the_committed_vocabulary_reference_is_what_the_registry_renders() -> None:
    proc = _cli("events", "--vocabulary")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == VOCABULARY.read_text(encoding="utf-8"), (
        "docs/vocabulary.md is stale: run `DSH_SESSION_DISABLE_PLUGINS=example,adk,"
        "claude-agent,langgraph,openai-agents,pydantic-ai "
        "dsh-session events --vocabulary > docs/vocabulary.md`")


def test_the_vocabulary_reference_gives_python_and_wire_names_of_every_struct() -> None:
    import msgspec.inspect as mi

    from dsh_session_core import create_plugin_manager
    from dsh_session_core._plugins.manager import PluginHooks
    from dsh_session_core._schema.vocabulary_doc import render_vocabulary

    registry = PluginHooks(create_plugin_manager(blocked=["example"])).build_registry()
    text = render_vocabulary(registry)
    for entry in registry:
        info = mi.type_info(entry.payload)
        assert isinstance(info, mi.StructType)
        assert f"### {entry.payload.__name__}\n" in text
        assert f"the payload of `{entry.type}` (plugin `{entry.plugin}`)" in text
        for f in info.fields:
            assert f"| `{f.name}` | `{f.encode_name}` |" in text
    for member in registry.members:
        assert f"### {member.struct.__name__}\n" in text
    assert "| `tool_call_id` | `toolCallId` | str |  |" in text  # ToolResultBlock
    assert "| `is_error` | `isError` | bool | optional |" in text
