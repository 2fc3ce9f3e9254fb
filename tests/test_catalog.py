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

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "docs" / "persistence-catalog.md"


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # The catalog documents this repository's packages; the test suite's third-party
    # example plugin is installed too, and is blocked here like any plugin can be.
    env = {**os.environ, "DSH_SESSION_DISABLE_PLUGINS": "example"}
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
