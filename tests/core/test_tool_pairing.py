"""Tool-pairing balance over the surface (spec §9, scenarios L 132-142). The surface node
lists are written out by hand from each scenario's log; expected values come from the
spec text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import CORE_EVENT, accepted_reference_logs
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core._base.json_values import JsonObject, freeze
from dsh_session_core._model.tool_pairing import is_tool_pairing_balanced
from dsh_session_core.errors import ToolPairingError
from dsh_session_core.events import (
    Event,
    OpaqueEvent,
)

# --- builders (spec §11 shorthands; seq = index in the list) -----------------------------

_USER = {"kind": "user"}


def ev(type: str, data: Any, **surface: Any) -> dict[str, Any]:
    return {"type": type, "data": data, **surface}


def log(*entries: dict[str, Any]) -> list[Event]:
    """Typed events from wire-shape entries, numbered from 0 (``time`` = ``seq``)."""
    events: list[Event] = []
    for seq, entry in enumerate(entries):
        wire = {"seq": seq, "time": seq, **entry}
        events.append(msgspec.convert(wire, type=CORE_EVENT))
    return events


def TS(n: int, kind: str = "message") -> dict[str, Any]:
    return ev("turn/start", {"turn": n, "trigger": {"kind": kind, "source": _USER}})


def TE(n: int) -> dict[str, Any]:
    return ev("turn/end", {"turn": n, "reason": {"kind": "completed"}})


def SS(t: int = 1, s: int = 1) -> dict[str, Any]:
    return ev("step/start", {"turn": t, "step": s})


def SE(t: int = 1, s: int = 1) -> dict[str, Any]:
    return ev("step/end", {"turn": t, "step": s})


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def U(t: str, **surface: Any) -> dict[str, Any]:
    op = surface or {"surfaceOp": "append"}
    return ev("user/message", {"content": [text(t)], "source": _USER}, **op)


def A(*blocks: dict[str, Any], t: int = 1, s: int = 1) -> dict[str, Any]:
    data = {"turn": t, "step": s, "content": list(blocks)}
    return ev("assistant/message", data, surfaceOp="append")


def CALL(call_id: str) -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": "bash", "arguments": "{}"}


def TC(call_id: str) -> dict[str, Any]:
    data = {"turn": 1, "step": 1, "callId": call_id, "name": "bash", "arguments": "{}"}
    return ev("tool/call", data)


def TR(call_id: str, out: str = "out", t: int = 1, s: int = 1) -> dict[str, Any]:
    data = {"turn": t, "step": s, "callId": call_id, "content": [text(out)], "isError": False}
    return ev("tool/result", data, surfaceOp="append")


def CTX(t: str) -> dict[str, Any]:
    return ev("context/message", {"content": [text(t)], "source": _USER}, surfaceOp="append")


# The log of scenarios 132-133: the surface is [1 (user), 3 (assistant), 5 (result)].
LOG_132 = log(TS(1), U("go"), SS(), A(text("t"), CALL("c1")), TC("c1"), TR("c1"), SE(), TE(1))
NODES_132 = [1, 3, 5]


# --- L. scenarios 132-142 ----------------------------------------------------------------


def test_l132_cuts_before_nodes() -> None:
    assert is_tool_pairing_balanced(NODES_132, LOG_132, 1) is True
    assert is_tool_pairing_balanced(NODES_132, LOG_132, 3) is True
    assert is_tool_pairing_balanced(NODES_132, LOG_132, 5) is False


def test_l133_cuts_after_nodes() -> None:
    assert is_tool_pairing_balanced(NODES_132, LOG_132, None) is True  # after the result
    assert is_tool_pairing_balanced(NODES_132, LOG_132, 5) is False  # after the assistant
    assert is_tool_pairing_balanced(NODES_132, LOG_132, 3) is True  # after the user


def test_l134_unanswered_call_at_the_tail() -> None:
    events = log(TS(1), SS(), A(CALL("c1")))
    assert is_tool_pairing_balanced([2], events, None) is False


def test_l135_steering_after_a_closed_step() -> None:
    steering = ev(
        "steering/message",
        {"turn": 1, "content": [text("s")], "source": _USER},
        surfaceOp="append",
    )
    events = log(TS(1), SS(), A(text("a")), SE(), steering)
    assert is_tool_pairing_balanced([2, 4], events, None) is True


def test_l136_user_message_only() -> None:
    events = log(TS(1), U("hi"))
    assert is_tool_pairing_balanced([1], events, 1) is True
    assert is_tool_pairing_balanced([1], events, None) is True


def test_l137_two_calls_two_results() -> None:
    events = log(TS(1), SS(), A(CALL("c1"), CALL("c2")), TR("c1"), TR("c2"))
    assert is_tool_pairing_balanced([2, 3, 4], events, 4) is False  # after the first result
    assert is_tool_pairing_balanced([2, 3, 4], events, None) is True  # after the second


def test_l138_context_between_call_and_result() -> None:
    events = log(TS(1), SS(), A(CALL("c1")), CTX("mid-step"), TR("c1"))
    assert is_tool_pairing_balanced([2, 3, 4], events, 3) is False  # before the context
    assert is_tool_pairing_balanced([2, 3, 4], events, 4) is False  # after it


def test_l139_injection_turn() -> None:
    events = log(TS(1, kind="injection"), CTX("injected"), TE(1))
    assert is_tool_pairing_balanced([1], events, 1) is True
    assert is_tool_pairing_balanced([1], events, None) is True


def test_l140_checkpoint_replacing_the_head() -> None:
    replace = {"surfaceOp": {"op": "replace", "start": 2, "end": 4}}
    events = log(
        TS(1), SS(), U("u1"), A(CALL("c1")), TR("c1"), SE(), TE(1),
        TS(2), SS(2, 1), U("CHECKPOINT", **replace), A(text("a2"), t=2),
    )  # fmt: skip
    surface = [9, 10]  # the checkpoint shadows u1..result, then a2 is appended
    assert is_tool_pairing_balanced(surface, events, 9) is True  # before the checkpoint
    assert is_tool_pairing_balanced(surface, events, 10) is True  # after it


def test_l141_result_without_a_call_raises_unless_it_sits_at_the_cut() -> None:
    events = log(TS(1), SS(), TR("c1"))
    with pytest.raises(ToolPairingError) as raised:
        is_tool_pairing_balanced([2], events, None)
    assert str(raised.value) == (
        "tool-pairing balance: tool/result at surface seq 2 has no matching tool-call "
        "(corrupt surface)"
    )
    assert raised.value.seq == 2
    assert is_tool_pairing_balanced([2], events, 2) is True


def test_l142_a_seq_not_on_the_surface_is_the_after_tail_cut() -> None:
    assert is_tool_pairing_balanced(NODES_132, LOG_132, 999) is True
    events = log(TS(1), SS(), A(CALL("c1")))
    assert is_tool_pairing_balanced([2], events, 999) is False
    assert is_tool_pairing_balanced(NODES_132, LOG_132, 0) is True  # turn/start: not a node


# --- beyond the scenarios ----------------------------------------------------------------


def test_results_count_and_never_match_ids() -> None:
    events = log(TS(1), SS(), A(CALL("c1")), TR("someone-else"))
    assert is_tool_pairing_balanced([2, 3], events, None) is True


def test_usage_only_assistant_message_is_neutral() -> None:
    events = log(TS(1), SS(), A())
    assert is_tool_pairing_balanced([2], events, None) is True


def test_opaque_assistant_message_counts_its_tool_call_blocks() -> None:
    # A block kind no schema knows makes the event opaque; its calls still count.
    content = [{"type": "image", "url": "x"}, CALL("c1"), CALL("c2")]
    data = {"turn": 1, "step": 1, "content": content}
    wire = {"type": "assistant/message", "seq": 0, "time": 0, "data": data, "surfaceOp": "append"}
    frozen = freeze(wire)
    assert isinstance(frozen, JsonObject)
    events = log(TS(1), TR("c1"), TR("c2"))  # seqs 1 and 2 are the results
    events[0] = OpaqueEvent(0, 0, frozen["data"], wire=frozen)
    assert is_tool_pairing_balanced([0, 1], events, None) is False
    assert is_tool_pairing_balanced([0, 1, 2], events, None) is True


# A surface as a list of deltas: +k for an assistant message with k calls, -1 for a result.
_deltas = st.lists(st.one_of(st.integers(0, 3), st.just(-1)), max_size=12)


def _surface(deltas: list[int]) -> list[Event]:
    entries = []
    for i, d in enumerate(deltas):
        entries.append(TR("c") if d < 0 else A(*(CALL(f"c{i}-{j}") for j in range(d))))
    return log(*entries)


@given(_deltas, st.integers(0, 13))
def test_a_cut_is_balanced_iff_the_calls_before_it_are_answered(
    deltas: list[int], cut: int
) -> None:
    events, nodes = _surface(deltas), list(range(len(deltas)))
    before = cut if cut < len(deltas) else None
    prefix = [sum(deltas[:i]) for i in range(1, len(deltas) + 1)]
    stop = len(deltas) if before is None else before
    if any(p < 0 for p in prefix[:stop]):
        with pytest.raises(ToolPairingError):
            is_tool_pairing_balanced(nodes, events, before)
    else:
        assert is_tool_pairing_balanced(nodes, events, before) == (sum(deltas[:stop]) == 0)


# --- the reference's own verdicts --------------------------------------------------------


def test_balance_matches_every_reference_golden(upstream: Path) -> None:
    checked, mismatched = 0, []
    for log, expected, events in accepted_reference_logs(upstream, "toolPairingBalanced"):
        nodes = [node["seq"] for node in expected["surface"]]
        verdict: Any
        try:
            verdict = is_tool_pairing_balanced(nodes, events, None)
        except ToolPairingError as exc:
            verdict = {"error": {"name": "Error", "message": str(exc)}}
        if verdict != expected["toolPairingBalanced"]:
            mismatched.append(str(log))
        checked += 1
    assert checked > 300
    assert mismatched == []
