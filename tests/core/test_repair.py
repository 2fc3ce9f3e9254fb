"""Crash repair: ``interrupted_turn_closers`` (spec §7, scenarios J 101-115). Expected
values come from the spec text; each closer is compared in its wire shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from helpers import CORE_EVENT, accepted_reference_logs
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core import encode_event
from dsh_session_core._base.json_values import JsonObject, freeze
from dsh_session_core._model.repair import interrupted_turn_closers
from dsh_session_core.events import (
    Event,
    OpaqueEvent,
)

# --- builders (spec §11 shorthands; the raw repair fixtures carry no surfaceOp) -----------

_USER = {"kind": "user"}
INTERRUPTED = "Tool call interrupted by a crash; no result was recorded."


def ev(type: str, data: Any, **surface: Any) -> dict[str, Any]:
    return {"type": type, "data": data, **surface}


def log(*entries: dict[str, Any], times: dict[int, int] | None = None) -> list[Event]:
    """Typed events numbered from 0; ``time`` = ``seq`` unless ``times`` says otherwise."""
    events: list[Event] = []
    for seq, entry in enumerate(entries):
        wire = {"seq": seq, "time": (times or {}).get(seq, seq), **entry}
        events.append(msgspec.convert(wire, type=CORE_EVENT))
    return events


def TS(n: int) -> dict[str, Any]:
    return ev("turn/start", {"turn": n, "trigger": {"kind": "message", "source": _USER}})


def TE(n: int) -> dict[str, Any]:
    return ev("turn/end", {"turn": n, "reason": {"kind": "completed"}})


def SS(t: int, s: int) -> dict[str, Any]:
    return ev("step/start", {"turn": t, "step": s})


def SE(t: int, s: int) -> dict[str, Any]:
    return ev("step/end", {"turn": t, "step": s})


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def A(t: int, s: int, *blocks: dict[str, Any], **surface: Any) -> dict[str, Any]:
    return ev("assistant/message", {"turn": t, "step": s, "content": list(blocks)}, **surface)


def CALL(call_id: str) -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": "bash", "arguments": "{}"}


def TC(t: int, s: int, call_id: str) -> dict[str, Any]:
    data = {"turn": t, "step": s, "callId": call_id, "name": "bash", "arguments": "{}"}
    return ev("tool/call", data)


def TR(t: int, s: int, call_id: str, out: str) -> dict[str, Any]:
    data = {"turn": t, "step": s, "callId": call_id, "content": [text(out)], "isError": False}
    return ev("tool/result", data, surfaceOp="append")


def wire(events: list[Event]) -> list[Any]:
    """Events in their wire shape: plain dicts and lists, absent keys left out."""
    return [msgspec.json.decode(encode_event(e)) for e in events]


def synthetic(turn: int, step: int, call_id: str) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "callId": call_id,
        "content": [{"type": "text", "text": INTERRUPTED}],
        "isError": True,
        "error": {"name": "InterruptedError", "code": "interrupted"},
    }


E104 = (TS(2), SS(2, 1), A(2, 1, text("calling a tool"), CALL("call-1")))  # seqs 0-2
LOG_104 = log(*E104)


# --- J. scenarios 101-115 ----------------------------------------------------------------


def test_j101_closed_or_empty_log_needs_nothing() -> None:
    assert interrupted_turn_closers(log(TS(1), TE(1))) == []
    assert interrupted_turn_closers([]) == []


def test_j102_open_turn_gets_an_interrupted_turn_end() -> None:
    closers = interrupted_turn_closers(log(TS(1)))
    assert wire(closers) == [
        {
            "type": "turn/end",
            "seq": 1,
            "time": 0,
            "data": {"turn": 1, "reason": {"kind": "interrupted"}},
        }
    ]


def test_j103_open_step_is_closed_first() -> None:
    closers = wire(interrupted_turn_closers(log(TS(1), SS(1, 1))))
    assert [c["type"] for c in closers] == ["step/end", "turn/end"]
    assert [c["seq"] for c in closers] == [2, 3]
    assert [c["time"] for c in closers] == [1, 1]
    assert closers[0]["data"] == {"turn": 1, "step": 1}


def test_j104_unanswered_call_gets_a_synthetic_result() -> None:
    closers = wire(interrupted_turn_closers(LOG_104))
    assert [c["type"] for c in closers] == ["tool/result", "step/end", "turn/end"]
    assert [c["seq"] for c in closers] == [3, 4, 5]
    result = closers[0]
    assert result["data"] == synthetic(2, 1, "call-1")
    assert result["surfaceOp"] == "append"
    assert "sourceEventSeqs" not in result


def test_j105_answered_call_needs_no_result() -> None:
    closers = interrupted_turn_closers(log(*E104, TR(2, 1, "call-1", "ok")))
    assert [c.type for c in closers] == ["step/end", "turn/end"]


def test_j106_call_in_a_closed_step_gets_no_result() -> None:
    closers = wire(interrupted_turn_closers(log(*E104, SE(2, 1))))
    assert [(c["type"], c["seq"]) for c in closers] == [("turn/end", 4)]


def test_j107_only_the_open_turns_calls_count() -> None:
    events = log(
        TS(1), SS(1, 1), A(1, 1, CALL("old-call")), TR(1, 1, "old-call", "ok"), SE(1, 1), TE(1),
        TS(2), SS(2, 1), A(2, 1, CALL("new-call")),
    )  # fmt: skip
    results = [c for c in wire(interrupted_turn_closers(events)) if c["type"] == "tool/result"]
    assert [r["data"]["callId"] for r in results] == ["new-call"]


def test_j108_one_of_two_calls_answered() -> None:
    events = log(TS(1), SS(1, 1), A(1, 1, CALL("call-a"), CALL("call-b")), TR(1, 1, "call-a", "ok"))
    results = [c for c in wire(interrupted_turn_closers(events)) if c["type"] == "tool/result"]
    assert [r["data"]["callId"] for r in results] == ["call-b"]


def test_j109_logged_tool_call_becomes_the_provenance() -> None:
    events = log(TS(1), SS(1, 1), A(1, 1, CALL("call-1")), TC(1, 1, "call-1"))
    result = wire(interrupted_turn_closers(events))[0]
    assert result["type"] == "tool/result"
    assert result["sourceEventSeqs"] == [3]
    assert result["surfaceOp"] == "append"


def test_j110_orphan_tool_call_gets_no_result() -> None:
    closers = interrupted_turn_closers(log(TS(1), SS(1, 1), TC(1, 1, "orphan")))
    assert [c.type for c in closers] == ["step/end", "turn/end"]


def test_j111_idempotent() -> None:
    closers = interrupted_turn_closers(LOG_104)
    assert interrupted_turn_closers(LOG_104 + closers) == []


def test_j112_seq_follows_the_last_event_not_the_length() -> None:
    only = msgspec.convert({"seq": 10, "time": 500, **TS(1)}, type=CORE_EVENT)
    (closer,) = wire(interrupted_turn_closers([only]))
    assert (closer["seq"], closer["time"]) == (11, 500)


def test_j113_call_outside_any_step() -> None:
    closers = wire(interrupted_turn_closers(log(TS(1), A(1, 1, CALL("x")))))
    assert [c["type"] for c in closers] == ["tool/result", "turn/end"]
    assert closers[0]["data"]["step"] == 1


def test_j114_input_is_unchanged() -> None:
    events = log(*E104, TC(2, 1, "call-1"))
    before_list, before_wire = list(events), wire(events)
    interrupted_turn_closers(events)
    assert events == before_list
    assert wire(events) == before_wire


def test_j115_repaired_log_derives_a_tool_result_session() -> None:
    from dsh_session_core._base.json_values import thaw
    from dsh_session_core._model.session import Session

    # A seed needs markers, so here the assistant message carries surfaceOp "append".
    marked = A(2, 1, text("calling a tool"), CALL("call-1"), surfaceOp="append")
    events = log(TS(2), SS(2, 1), marked)
    seeded = Session("s1", seed=[*events, *interrupted_turn_closers(events)])
    messages = [msgspec.json.decode(msgspec.json.encode(thaw(m))) for m in seeded.derive_messages()]
    assert [m["role"] for m in messages] == ["assistant", "user"]
    assert messages[1]["content"] == [
        {
            "type": "tool-result",
            "toolCallId": "call-1",
            "content": [text(INTERRUPTED)],
            "isError": True,
        }
    ]


# --- beyond the scenarios ----------------------------------------------------------------


def test_reannounced_call_keeps_its_place_and_loses_its_call_seq() -> None:
    events = log(
        TS(1), SS(1, 1), A(1, 1, CALL("x")), TC(1, 1, "x"), A(1, 1, CALL("y")), A(1, 1, CALL("x"))
    )
    results = [c for c in wire(interrupted_turn_closers(events)) if c["type"] == "tool/result"]
    assert [r["data"]["callId"] for r in results] == ["x", "y"]
    assert "sourceEventSeqs" not in results[0]


def test_result_turn_is_the_open_turn_and_step_the_messages() -> None:
    events = log(TS(3), SS(3, 2), A(9, 7, CALL("c")))
    result, step_end, _ = wire(interrupted_turn_closers(events))
    assert (result["data"]["turn"], result["data"]["step"]) == (3, 7)
    assert step_end["data"] == {"turn": 3, "step": 2}


def opaque(entry: dict[str, Any]) -> OpaqueEvent:
    """An event kept verbatim, as the log holds one no schema fits."""
    frozen = freeze(entry)
    assert isinstance(frozen, JsonObject)
    return OpaqueEvent(entry["seq"], entry["time"], frozen["data"], wire=frozen)


def test_opaque_events_are_read_like_typed_ones() -> None:
    events = log(*E104, TC(2, 1, "call-1"))
    # An orphaned compact/start (a type core does not know) is ignored.
    compact = opaque({"type": "compact/start", "seq": 4, "time": 4, "data": {"turn": 2}})
    typed = interrupted_turn_closers([*events, compact])
    as_opaque = [opaque(entry) for entry in wire(events)]
    assert wire(interrupted_turn_closers([*as_opaque, compact])) == wire(typed)
    assert [c.type for c in typed] == ["tool/result", "step/end", "turn/end"]


# Random logs from the event grammar the scan cares about, with contiguous seqs.
_steps = st.lists(
    st.one_of(
        st.builds(TS, st.integers(1, 3)),
        st.builds(TE, st.integers(1, 3)),
        st.builds(SS, st.integers(1, 3), st.integers(1, 3)),
        st.builds(SE, st.integers(1, 3), st.integers(1, 3)),
        st.lists(st.sampled_from(["a", "b", "c"]), max_size=3).map(
            lambda ids: A(1, 1, *map(CALL, ids))
        ),
        st.sampled_from(["a", "b", "c", "z"]).map(lambda i: TC(1, 1, i)),
        st.sampled_from(["a", "b", "c", "z"]).map(lambda i: TR(1, 1, i, "ok")),
    ),
    max_size=15,
)


@given(_steps)
def test_closers_are_idempotent_and_well_formed(entries: list[dict[str, Any]]) -> None:
    events = log(*entries)
    closers = interrupted_turn_closers(events)
    assert interrupted_turn_closers([*events, *closers]) == []
    if not closers:
        return
    assert [c.seq for c in closers] == list(range(len(events), len(events) + len(closers)))
    assert {c.time for c in closers} == {events[-1].time}
    types = [c.type for c in closers]
    assert types[-1] == "turn/end"
    assert set(types[:-1]) <= {"tool/result", "step/end"}
    assert types.count("step/end") <= 1


# --- the reference's own closers ---------------------------------------------------------


def test_closers_match_every_reference_golden(upstream: Path) -> None:
    checked, mismatched = 0, []
    for log, expected, events in accepted_reference_logs(upstream, "closers"):
        if wire(interrupted_turn_closers(events)) != expected["closers"]:
            mismatched.append(str(log))
        checked += 1
    assert checked > 300
    assert mismatched == []
