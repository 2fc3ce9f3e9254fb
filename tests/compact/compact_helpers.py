"""Builders for the compaction tests (spec plugins-persistence §13, scenarios 72-78).

Sessions come from a store whose plugin manager has the ``compact`` plugin registered
by hand (no entry point is loaded), so the ``compact/*`` events are typed. Every
builder appends exactly what the spec's shorthand names, in the wire shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

import dsh_session_compact.plugin as compact_plugin
from dsh_session_compact import SummaryRequest, SummaryResult
from dsh_session_core import (
    Event,
    PluginManager,
    Session,
    SessionStore,
    create_plugin_manager,
    encode_event,
)
from dsh_session_core.vocabulary import FinishReason

JSON = Any


def compact_pm() -> PluginManager:
    """A manager with core and the ``compact`` plugin only."""
    pm = create_plugin_manager(autoload=False)
    pm.register(compact_plugin, name="compact")
    return pm


def make_store(pm: PluginManager | None = None, **kw: Any) -> SessionStore:
    """A store (``kw``: ``strict=False`` or ``foreign_types`` for a lenient one)."""
    return SessionStore(pm if pm is not None else compact_pm(), clock=lambda: 1, **kw)


def wire(event: Event) -> dict[str, JSON]:
    """An event's log line, parsed (key order kept)."""
    out: dict[str, JSON] = msgspec.json.decode(encode_event(event))
    return out


def text(t: str) -> dict[str, JSON]:
    return {"type": "text", "text": t}


def call(call_id: str, name: str = "bash", arguments: str = "{}") -> dict[str, JSON]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


# --- appenders (the §13 shorthands) ---------------------------------------------------


def TS(s: Session, turn: int) -> Event:
    return s.append(
        "turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    )


def TE(s: Session, turn: int) -> Event:
    return s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def SS(s: Session, turn: int, step: int) -> Event:
    return s.append("step/start", {"turn": turn, "step": step})


def SE(s: Session, turn: int, step: int) -> Event:
    return s.append("step/end", {"turn": turn, "step": step})


def U(s: Session, t: str) -> Event:
    return s.append(
        "user/message", {"content": [text(t)], "source": {"kind": "user"}}, surface_op="append"
    )


def A(s: Session, turn: int, step: int, blocks: Sequence[dict[str, JSON]]) -> Event:
    return s.append(
        "assistant/message",
        {"turn": turn, "step": step, "content": list(blocks)},
        surface_op="append",
    )


def TC(s: Session, turn: int, step: int, call_id: str) -> Event:
    return s.append(
        "tool/call",
        {"turn": turn, "step": step, "callId": call_id, "name": "bash", "arguments": "{}"},
    )


def TR(s: Session, turn: int, step: int, call_id: str, out: str, *, error: bool = False) -> Event:
    return s.append(
        "tool/result",
        {"turn": turn, "step": step, "callId": call_id, "content": [text(out)], "isError": error},
        surface_op="append",
    )


def scenario_log(store: SessionStore | None = None, *, open_turn: bool = True) -> Session:
    """The log of scenario 72: two closed turns of one step each (a 2000-``x`` user
    message and a 2000-``y`` assistant message), then turn 3 left open (seqs 0-12).
    With ``open_turn=False`` turn 3 is not started (seqs 0-11)."""
    s = (store if store is not None else make_store()).create()
    for turn in (1, 2):
        TS(s, turn)
        SS(s, turn, 1)
        U(s, "x" * 2000)
        A(s, turn, 1, [text("y" * 2000)])
        SE(s, turn, 1)
        TE(s, turn)
    if open_turn:
        TS(s, 3)
    return s


def stub(
    summary: str = "SUMMARY", *, finish: FinishReason | None = None, model: str | None = None
) -> Callable[[SummaryRequest], SummaryResult]:
    """A summarizer that always answers ``summary``, recording each request."""
    requests: list[SummaryRequest] = []

    def summarize(request: SummaryRequest) -> SummaryResult:
        requests.append(request)
        return SummaryResult(content=[text(summary)], finish=finish, model=model)

    summarize.requests = requests  # type: ignore[attr-defined]
    return summarize


def raising(message: str) -> Callable[[SummaryRequest], SummaryResult]:
    def summarize(request: SummaryRequest) -> SummaryResult:
        raise RuntimeError(message)

    return summarize


def nodes(s: Session) -> list[int]:
    """The surface node seqs, head to tail."""
    return list(s.surface.seqs)


def types_from(s: Session, seq: int) -> list[str]:
    return [e.type for e in s.events[seq:]]


#: The scenario-73 config, in the reference's shape.
CONFIG_73: dict[str, JSON] = {
    "contextWindow": 4000,
    "thresholdRatio": 0.5,
    "retainTokens": 600,
    "compactionRetries": 1,
    "maxTokens": 8192,
    "summarizationModel": "",
    "auto": False,
}
