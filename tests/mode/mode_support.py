"""Builders shared by the mode tests: a store with the mode plugin registered by hand, the
boundary and header events of the spec's scenarios, and readers for what got logged."""

from __future__ import annotations

from typing import Any

import msgspec

import dsh_session_mode.plugin
from dsh_session_core import (
    Event,
    PluginManager,
    Session,
    SessionStore,
    create_plugin_manager,
    encode_event,
)
from dsh_session_mode import Modes


def mode_pm() -> PluginManager:
    """Core plus the ``mode`` plugin module, without reading entry points."""
    pm = create_plugin_manager(autoload=False)
    pm.register(dsh_session_mode.plugin, name="mode")
    return pm


def wired(config: Any = None) -> tuple[Modes, Session]:
    """A session in a store whose plugin manager has the ``Modes`` service registered:
    boundary events flush through its ``session_event`` hook."""
    pm = mode_pm()
    modes = Modes(config)
    pm.register(modes, name="modes")
    return modes, SessionStore(pm).create()


def bare(config: Any = None) -> tuple[Modes, Session]:
    """A session whose boundaries nobody watches (the harness calls ``flush``)."""
    return Modes(config), SessionStore(mode_pm()).create()


def turn_start(s: Session, turn: int = 1) -> Event:
    return s.append(
        "turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    )


def step_end(s: Session, turn: int = 1, step: int = 1) -> Event:
    return s.append("step/end", {"turn": turn, "step": step})


def header(s: Session) -> Event:
    """A minimal ``request/header``: what the model was last told."""
    return s.append("request/header", {"header": {"config": {"model": "test-model"}},
                                       "reason": "initial"})


def set_mode(s: Session, mode: str) -> Event:
    return s.append("mode/set", {"mode": mode})


def wires(s: Session) -> list[dict[str, Any]]:
    """Every event as its parsed log line (key order kept)."""
    return [msgspec.json.decode(encode_event(e)) for e in s.events]


def types(s: Session) -> list[str]:
    return [e.type for e in s.events]


def notices(s: Session) -> list[str]:
    """The text of every ``context/message`` in the log."""
    out = []
    for w in wires(s):
        if w["type"] == "context/message":
            out.append("".join(b.get("text", "") for b in w["data"]["content"]))
    return out
