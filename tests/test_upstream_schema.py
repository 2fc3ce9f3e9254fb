"""Reference logs load leniently, and the strict check reports exactly the events that
break their schemas: none in the recorded logs, one in each of the three hand-written
fixtures whose payloads are wrong on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import UPSTREAM
from dsh_session_core import check_events, core_registry
from dsh_session_core._logformat.logfile import parse_log

SNAPSHOT = "fixtures/packages/support/acp-snapshot/"
BROKEN = {
    "authored-error": ("turn/end", "$.data"),
    "blocked-log": ("hook/result", None),
    "pin-turn": ("turn/start", "$.data"),
}


def _fixture_logs() -> list[Path]:
    root = UPSTREAM / "fixtures"
    return sorted(root.rglob("*.jsonl")) if root.is_dir() else []


def test_recorded_logs_break_no_core_schema(upstream: Path) -> None:
    recorded = [p for p in _fixture_logs() if SNAPSHOT not in str(p.relative_to(UPSTREAM))]
    assert len(recorded) == 43
    registry = core_registry()
    for path in recorded:
        events = parse_log(path.read_bytes(), registry).events
        assert check_events(events, registry) == [], path


@pytest.mark.parametrize("name", ["authored-error", "pin-turn"])
def test_hand_written_core_breakage_is_reported(upstream: Path, name: str) -> None:
    path = UPSTREAM / SNAPSHOT / "tests/fixtures/suite" / name / "session.jsonl"
    registry = core_registry()
    problems = check_events(parse_log(path.read_bytes(), registry).events, registry)
    assert [p.type for p in problems] == [BROKEN[name][0]]
    assert problems[0].plugin == "core"
    assert problems[0].path.startswith("$.data")


def test_strict_check_reports_types_no_plugin_declares(upstream: Path) -> None:
    path = UPSTREAM / SNAPSHOT / "tests/fixtures/suite/blocked-log/session.jsonl"
    registry = core_registry()  # hook/* belongs to a plugin not loaded here
    events = parse_log(path.read_bytes(), registry).events
    assert check_events(events, registry) == []
    strict = check_events(events, registry, strict=True)
    # The log holds one event, a hook/result with no turn, point or handler.
    assert [(p.type, p.seq) for p in strict] == [("hook/result", 1)]
