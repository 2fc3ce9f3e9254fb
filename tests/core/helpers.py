"""Shared builders for the core acceptance tests (spec core.md §11 shorthands).

The shorthands are the testing kit's (``dsh_session_core.testing``), under the spec's
names: every builder appends exactly what the shorthand names, in the wire shape
(camelCase keys), and returns the logged event. ``as_json`` turns any event, message or
list of them into plain JSON (dicts and lists), so tests compare with the spec's JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from dsh_session_core import Event, Session, core_registry, encode_event
from dsh_session_core.testing import USER_SOURCE as KIT_USER_SOURCE
from dsh_session_core.testing import (
    assistant,
    assistant_data,
    call_block,
    step_end,
    step_start,
    text_block,
    tool_call,
    tool_call_data,
    tool_result,
    tool_result_data,
    turn_end,
    turn_end_data,
    turn_start,
    turn_start_data,
    user,
    user_data,
    wire_event,
)
from dsh_session_core.testing import step_data as step_data  # the spec's name too

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


text = text_block
CALL = call_block
USER_SOURCE: dict[str, JSON] = dict(KIT_USER_SOURCE)


# --- the §11 shorthands: the testing kit's payloads and appenders, by the spec's names ---

ts_data = turn_start_data
te_data = turn_end_data
u_data = user_data
a_data = assistant_data
tc_data = tool_call_data


def tr_data(t: int, s: int, call_id: str, out: str) -> dict[str, JSON]:
    return tool_result_data(t, s, call_id, out)


def chunk_data(t: int, s: int, delta: str = "hi") -> dict[str, JSON]:
    return {"turn": t, "step": s, "chunk": {"type": "text-delta", "index": 0, "text": delta}}


TS = turn_start
TE = turn_end
SS = step_start
SE = step_end
U = user
A = assistant


def TC(s: Session, t: int, st: int, call_id: str) -> Event:
    return tool_call(s, t, st, call_id)


def TR(s: Session, t: int, st: int, call_id: str, out: str) -> Event:
    return tool_result(s, t, st, call_id, out)


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
    """A complete event in its wire shape, for seeds (at time 1 unless given)."""
    return wire_event(type_, seq, data, time=time, surface_op=surface_op,
                      source_event_seqs=source_event_seqs)


def exact(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for a message quoted from the reference."""
    return re.escape(message)


def fixed_clock() -> int:
    return 1234


#: The union of every core event class, as msgspec decodes a log entry into one.
CORE_EVENT: Any = core_registry().line_decoder.type


def accepted_reference_logs(upstream: Path, key: str) -> Iterator[tuple[Path, Any, list[Event]]]:
    """Each reference log whose full golden holds ``key`` (the reference accepted the log
    as a whole), sorted: its path, that golden, and its events decoded by core's registry
    (the header left out)."""
    from dsh_session_core._schema.decode import decode_lines

    registry = core_registry()
    for golden in sorted((upstream / "goldens").rglob("*.full.json")):
        expected = msgspec.json.decode(golden.read_bytes())
        if key not in expected:
            continue  # the reference rejected this log as a whole
        log = (upstream / golden.relative_to(upstream / "goldens")).with_suffix("")
        lines = log.with_suffix(".jsonl").read_bytes().splitlines()[1:]
        yield log, expected, decode_lines(registry, lines)
