"""Shared builders for the core acceptance tests (spec core.md §11 shorthands).

Every builder appends exactly what the spec's shorthand names, in the wire shape
(camelCase keys), and returns the logged event. ``as_json`` turns any event, message or
list of them into plain JSON (dicts and lists), so tests compare with the spec's JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from dsh_session_core import Event, Session, core_registry, encode_event

JSON = Any


def _enc_hook(obj: object) -> object:
    # Read-only JSON objects (opaque data) are Mappings: encode them as their items.
    if isinstance(obj, Mapping):
        return dict(obj)
    msg = f"{type(obj).__name__} is not JSON"
    raise NotImplementedError(msg)


def as_json(value: object) -> JSON:
    """The plain JSON form (dicts, lists) of an event, message, payload or list of them."""
    if isinstance(value, Event):
        return msgspec.json.decode(encode_event(value))
    if isinstance(value, list | tuple) and value and all(isinstance(v, Event) for v in value):
        return [as_json(v) for v in value]
    return msgspec.json.decode(msgspec.json.encode(value, enc_hook=_enc_hook))


def wire(event: Event) -> dict[str, JSON]:
    """An event's log line, parsed (key order kept)."""
    out: dict[str, JSON] = msgspec.json.decode(encode_event(event))
    return out


def wires(session: Session) -> list[dict[str, JSON]]:
    """Every event of a session as its parsed log line."""
    return [wire(e) for e in session.events]


def messages(session: Session) -> list[JSON]:
    """``derive_messages()`` as plain JSON."""
    out: list[JSON] = as_json(session.derive_messages())
    return out


def scratch(session: Session) -> list[JSON]:
    """A from-scratch derivation: a new session seeded with this one's events."""
    return messages(Session("scratch", seed=list(session.events)))


def node_seqs(session: Session) -> list[int]:
    return [n.seq for n in session.surface.nodes]


def text(t: str) -> dict[str, JSON]:
    return {"type": "text", "text": t}


def CALL(call_id: str, name: str = "bash") -> dict[str, JSON]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"}


USER_SOURCE: dict[str, JSON] = {"kind": "user"}


# --- data builders (the payloads of the §11 shorthands) -----------------------------------


def ts_data(n: int) -> dict[str, JSON]:
    return {"turn": n, "trigger": {"kind": "message", "source": {"kind": "user"}}}


def te_data(n: int, reason: dict[str, JSON] | None = None) -> dict[str, JSON]:
    return {"turn": n, "reason": reason if reason is not None else {"kind": "completed"}}


def step_data(t: int, s: int) -> dict[str, JSON]:
    return {"turn": t, "step": s}


def u_data(x: str) -> dict[str, JSON]:
    return {"content": [text(x)], "source": {"kind": "user"}}


def a_data(t: int, s: int, blocks: Sequence[dict[str, JSON]]) -> dict[str, JSON]:
    return {"turn": t, "step": s, "content": list(blocks)}


def tc_data(t: int, s: int, call_id: str) -> dict[str, JSON]:
    return {"turn": t, "step": s, "callId": call_id, "name": "bash", "arguments": "{}"}


def tr_data(t: int, s: int, call_id: str, out: str) -> dict[str, JSON]:
    return {
        "turn": t,
        "step": s,
        "callId": call_id,
        "content": [text(out)],
        "isError": False,
    }


def chunk_data(t: int, s: int, delta: str = "hi") -> dict[str, JSON]:
    return {"turn": t, "step": s, "chunk": {"type": "text-delta", "index": 0, "text": delta}}


# --- appenders -------------------------------------------------------------------------


def TS(s: Session, n: int) -> Event:
    return s.append("turn/start", ts_data(n))


def TE(s: Session, n: int, reason: dict[str, JSON] | None = None) -> Event:
    return s.append("turn/end", te_data(n, reason))


def SS(s: Session, t: int, st: int) -> Event:
    return s.append("step/start", step_data(t, st))


def SE(s: Session, t: int, st: int) -> Event:
    return s.append("step/end", step_data(t, st))


def U(s: Session, x: str) -> Event:
    return s.append("user/message", u_data(x), surface_op="append")


def A(s: Session, t: int, st: int, blocks: Sequence[dict[str, JSON]]) -> Event:
    return s.append("assistant/message", a_data(t, st, blocks), surface_op="append")


def TC(s: Session, t: int, st: int, call_id: str) -> Event:
    return s.append("tool/call", tc_data(t, st, call_id))


def TR(s: Session, t: int, st: int, call_id: str, out: str) -> Event:
    return s.append("tool/result", tr_data(t, st, call_id, out), surface_op="append")


def REP(start: int, end: int) -> dict[str, JSON]:
    """A replace op in its wire shape."""
    return {"op": "replace", "start": start, "end": end}


def raw(
    type_: str,
    seq: int,
    data: JSON,
    *,
    time: int = 1,
    surface_op: JSON = None,
    source_event_seqs: list[int] | None = None,
) -> dict[str, JSON]:
    """A complete event in its wire shape, for seeds."""
    out: dict[str, JSON] = {"type": type_, "seq": seq, "time": time, "data": data}
    if source_event_seqs is not None:
        out["sourceEventSeqs"] = source_event_seqs
    if surface_op is not None:
        out["surfaceOp"] = surface_op
    return out


def exact(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for a message quoted from the reference."""
    return re.escape(message)


def fixed_clock() -> int:
    return 1234


#: The union of every core event class, as msgspec decodes a log entry into one.
CORE_EVENT: Any = core_registry().line_decoder.type
