"""The ``mode`` plugin as a package: entry-point discovery, the block list, the event
registration, the public API, and its imports (public core names only, no other plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

import dsh_session_mode
import dsh_session_mode.errors
import dsh_session_mode.plugin
from dsh_session_core import SessionStore, create_plugin_manager
from dsh_session_core.testing import check_plugin
from dsh_session_mode import ModeSet, ModeSetData

CATALOG_LINE = (
    "The session mode in force from this point on: log-only, non-surface, whole-value "
    "replace — the last `mode/set` in the log wins (see `fold_mode()`). A log with none folds "
    "to DEFAULT_MODE."
)


# The plugin as a user's installation loads it, whatever this shell's switches say.
pytestmark = pytest.mark.usefixtures("plugins_as_installed")


def test_the_plugin_check_passes() -> None:
    # The kit's check: the entry point, the registration, the block list, the errors.
    report = check_plugin("mode")
    assert report.plugin is dsh_session_mode.plugin
    assert report.errors is dsh_session_mode.errors
    assert report.event_types == ("mode/set",)
    entry = report.entry("mode/set")
    assert (entry.plugin, entry.event, entry.payload) == ("mode", ModeSet, ModeSetData)
    assert entry.surface is False
    assert entry.doc == CATALOG_LINE


def test_removed_by_the_block_list() -> None:
    pm = create_plugin_manager(blocked=["mode"])
    assert pm.get_plugin("mode") is None
    registry = SessionStore(pm).registry
    assert "mode/set" not in registry
    assert "todo/write" in registry  # only the blocked plugin is gone


def test_its_only_public_modules_are_plugin_events_and_errors() -> None:
    # (its __all__ and py.typed: the plugin check)
    src = Path(dsh_session_mode.__file__).parent
    public = {"__init__", "plugin", "events", "errors"}
    assert all(p.stem in public or p.stem.startswith("_") for p in src.glob("*.py"))
