"""The ``todo`` plugin as a package: entry-point discovery, the block list, the reference
logs' ``todo/write`` events decoding as typed events, the public API, and its imports."""

from __future__ import annotations

from pathlib import Path

import pytest

import dsh_session_todo
import dsh_session_todo.errors
import dsh_session_todo.plugin
from dsh_session_core import (
    EventRegistry,
    SessionStore,
    create_plugin_manager,
    encode_event,
)
from dsh_session_core.testing import check_plugin
from dsh_session_todo import TodoItem, TodoWrite, TodoWriteData, current_todos

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream"
SNAPSHOTS = "fixtures/examples/acp-agent/tests/snapshots"
CATALOG_LINE = (
    "The agent's whole todo list, carried as a full snapshot and replaced wholesale on each "
    "write — the current list is the most recent `todo/write` (last-write-wins on replay, "
    "no fold). Appended by an owning agent via `todo_write(session, todos)`."
)


# The plugin as a user's installation loads it, whatever this shell's switches say.
pytestmark = pytest.mark.usefixtures("plugins_as_installed")


def test_the_plugin_check_passes() -> None:
    # The kit's check: the entry point, the registration, the block list, the errors.
    report = check_plugin("todo")
    assert report.plugin is dsh_session_todo.plugin
    assert report.errors is dsh_session_todo.errors
    assert report.event_types == ("todo/write",)
    entry = report.entry("todo/write")
    assert (entry.plugin, entry.event, entry.payload) == ("todo", TodoWrite, TodoWriteData)
    assert entry.surface is False
    assert entry.doc == CATALOG_LINE


# --- the reference logs ------------------------------------------------------------------


def _registry() -> EventRegistry:
    pm = create_plugin_manager(autoload=False)
    pm.register(dsh_session_todo.plugin, name="todo")
    return SessionStore(pm).registry


def _todo_lines(path: Path) -> list[bytes]:
    return [ln for ln in path.read_bytes().split(b"\n") if b'"type":"todo/write"' in ln]


def _reference_logs() -> list[Path]:
    if not (UPSTREAM / "README.md").is_file():
        pytest.skip(f"reference fixtures not found at {UPSTREAM}")
    logs = [UPSTREAM / SNAPSHOTS / n / "session.jsonl" for n in ("todo-plan",
                                                                  "repeat-tool-guard")]
    return logs + sorted((UPSTREAM / "random").glob("*.jsonl"))


def test_every_reference_todo_write_decodes_as_the_typed_event() -> None:
    decoder = _registry().line_decoder  # raises on anything that is not typed
    logs = _reference_logs()
    count = 0
    for path in logs:
        for line in _todo_lines(path):
            event = decoder.decode(line)
            assert type(event) is TodoWrite, (path.name, line)
            assert encode_event(event) == line  # and writes back byte for byte
            count += 1
    # 6 in the two recorded logs, 504 across the random ones (counted with grep).
    assert count == 510


def test_the_todo_plan_log_ends_with_three_tasks() -> None:
    path = _reference_logs()[0]
    decoder = _registry().line_decoder
    events = [decoder.decode(line) for line in _todo_lines(path)]
    assert current_todos(events) == (
        TodoItem(content="read the code", status="in_progress"),
        TodoItem(content="write the fix", status="pending"),
        TodoItem(content="run the tests", status="pending"),
    )


# --- the package -------------------------------------------------------------------------


def test_its_only_public_modules_are_plugin_events_and_errors() -> None:
    # (its __all__ and py.typed: the plugin check)
    src = Path(dsh_session_todo.__file__).parent
    public = {"__init__", "plugin", "events", "errors"}
    assert all(p.stem in public or p.stem.startswith("_") for p in src.glob("*.py"))
