"""Shared builders for the hook-protocol tests: a store that knows the ``hooks`` plugin's
event types (registered by hand, no entry point loaded), a session with an open turn,
and the parsed payload of a logged event (key order kept, for order checks)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

import dsh_session_hooks.plugin
from dsh_session_core import Event, Session, SessionStore, create_plugin_manager, encode_event

#: The reference logs, shipped beside the repository (not in it).
UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream"
HOOK_SNAPSHOTS = UPSTREAM / "fixtures" / "examples" / "acp-agent" / "tests" / "snapshots"


def hooks_store(clock: Callable[[], int] = lambda: 0) -> SessionStore:
    """A store with core and the ``hooks`` plugin (registered under its entry-point name)."""
    pm = create_plugin_manager(autoload=False)
    pm.register(dsh_session_hooks.plugin, name="hooks")
    return SessionStore(pm, clock=clock)


def open_turn(store: SessionStore | None = None) -> Session:
    """A session of ``store`` with turn 1 open (hook records live inside a turn)."""
    session = (store or hooks_store()).create()
    session.append(
        "turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    )
    return session


def line_of(event: Event) -> dict[str, Any]:
    """The event's log line, parsed; dicts keep the line's key order."""
    out: dict[str, Any] = msgspec.json.decode(encode_event(event))
    return out
