"""Spec plugins-persistence §7 and scenario 89: the ``tool/code-dispatch`` record of Code
Mode sub-calls (``_code_dispatch``): ids, argument normalization, the result summary."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from dsh_session_core import PluginManager, Session, SessionStore, encode_event
from dsh_session_core._model.code_dispatch import (
    SUMMARY_MAX_CHARS,
    CodeDispatcher,
    SubDispatch,
    ToolArgumentsError,
    normalize_tool_arguments,
    summarize_tool_result,
)
from dsh_session_core.errors import DshSessionError
from dsh_session_core.events import ToolCodeDispatch, ToolCodeDispatchData
from dsh_session_core.vocabulary import ReasoningBlock, TextBlock

TRIGGER = {"kind": "message", "source": {"kind": "user"}}
#: The reference logs, beside the repository (not in it).
UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream"


def data(session: Session) -> list[dict[str, Any]]:
    return [msgspec.json.decode(encode_event(e))["data"] for e in session.events]


def text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


def test_s89_two_sub_calls_and_a_bounded_summary(pm: PluginManager) -> None:
    s = SessionStore(pm).create()
    s.append("turn/start", {"turn": 1, "trigger": TRIGGER})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "call-7", "name": "run_code",
                           "arguments": '{"code":"..."}'})
    # The program calls two tools, one after the other.
    run = CodeDispatcher("call-7", s)
    first = run.begin("read", {"path": "a.txt"})
    run.record(first, [text("x" * 250)], is_error=False)
    second = run.begin("bash", {"command": "false"})
    run.record(second, [text("exit 1")], is_error=True)
    records = [e for e in s.events if e.type == "tool/code-dispatch"]
    assert [type(e) for e in records] == [ToolCodeDispatch, ToolCodeDispatch]
    assert data(s)[3:] == [
        {"parentCallId": "call-7", "subCallId": "call-7:code:1", "name": "read",
         "arguments": {"path": "a.txt"}, "isError": False, "resultSummary": "x" * 200 + "…"},
        {"parentCallId": "call-7", "subCallId": "call-7:code:2", "name": "bash",
         "arguments": {"command": "false"}, "isError": True, "resultSummary": "exit 1"},
    ]
    assert records[0].surface is False
    assert s.derive_messages() == []  # sub-calls never reach the model's context


def test_the_record_keeps_the_reference_key_order() -> None:
    s = Session("s")
    run = CodeDispatcher("p", s)
    event = run.record(run.begin("t", {}), [], is_error=False)
    assert event is not None
    line = encode_event(event)
    assert line.index(b'"data":{"parentCallId":"p","subCallId":"p:code:1","name":"t",'
                      b'"arguments":{},"isError":false,"resultSummary":""}') > 0


def test_a_reference_record_is_rebuilt_byte_for_byte() -> None:
    path = (UPSTREAM / "fixtures/examples/acp-agent/tests/snapshots/code-mode-turn"
            / "session.jsonl")
    if not path.is_file():
        pytest.skip(f"reference fixtures not found at {UPSTREAM}")
    lines = [ln for ln in path.read_bytes().split(b"\n") if b'"tool/code-dispatch"' in ln]
    assert len(lines) == 2
    wires = [json.loads(ln) for ln in lines]
    parent = wires[0]["data"]["parentCallId"]
    s = Session("s")
    run = CodeDispatcher(parent, s)
    for w in wires:
        d = w["data"]
        sub = run.begin(d["name"], d["arguments"])
        output = d["resultSummary"]  # both outputs are short: the summary is the text
        run.record(sub, [text(output)], is_error=d["isError"])
    for event, w in zip(s.events, wires, strict=True):
        assert msgspec.json.decode(encode_event(event))["data"] == w["data"]
        assert encode_event(event).endswith(json.dumps(w["data"], separators=(",", ":"),
                                                       ensure_ascii=False).encode() + b"}")


def test_sub_call_ids_count_from_one_per_run() -> None:
    one, two = CodeDispatcher("a"), CodeDispatcher("b")
    assert [one.begin("t", {}).sub_call_id for _ in range(3)] == ["a:code:1", "a:code:2",
                                                                 "a:code:3"]
    assert two.begin("t", {}).sub_call_id == "b:code:1"
    assert (one.count, two.count) == (3, 1)


def test_without_a_session_nothing_is_recorded() -> None:
    run = CodeDispatcher("p")
    assert run.record(run.begin("t", {"a": 1}), [text("ok")], is_error=False) is None


def test_the_payload_without_appending() -> None:
    sub = CodeDispatcher("p").begin("t", [1, "two"])
    payload = CodeDispatcher.payload(sub, [text("ok")], is_error=False)
    assert payload == {
        "parentCallId": "p", "subCallId": "p:code:1", "name": "t", "arguments": [1, "two"],
        "isError": False, "resultSummary": "ok"}
    typed = msgspec.convert(payload, ToolCodeDispatchData)  # fits core's schema
    assert typed.sub_call_id == "p:code:1"


def test_the_record_is_a_separate_parse_of_what_was_dispatched() -> None:
    s = Session("s")
    run = CodeDispatcher("p", s)
    original = {"path": "a", "opts": {"n": 1}}
    sub = run.begin("t", original)
    assert sub.arguments == original
    assert sub.arguments is not original
    sub.arguments["opts"]["n"] = 99  # the tool changes what it was given
    original["path"] = "changed"  # and so does the program
    run.record(sub, [], is_error=False)
    assert data(s)[0]["arguments"] == {"path": "a", "opts": {"n": 1}}
    assert sub == SubDispatch("p", "p:code:1", "t", '{"path":"a","opts":{"n":1}}', None)


# --- argument normalization ----------------------------------------------------------------


def test_normalization_is_a_json_round_trip() -> None:
    assert normalize_tool_arguments({"a": (1, 2), 3: None, True: 1.5}) == {
        "a": [1, 2], "3": None, "true": 1.5}
    assert normalize_tool_arguments("text") == "text"
    assert normalize_tool_arguments(None) is None
    assert normalize_tool_arguments({"é": "\u2028"}) == {"é": "\u2028"}


def test_no_arguments_at_all() -> None:
    message = ("tool arguments must be JSON-serializable (call the tool with an arguments "
               "object, e.g. `{}`)")
    with pytest.raises(ToolArgumentsError) as info:
        normalize_tool_arguments()
    assert str(info.value) == message
    with pytest.raises(ToolArgumentsError, match="call the tool with an arguments object"):
        normalize_tool_arguments(UNSET)
    assert isinstance(info.value, DshSessionError)
    assert isinstance(info.value, ValueError)


def test_a_value_json_cannot_represent() -> None:
    for value in (print, lambda: 1, dict):
        with pytest.raises(ToolArgumentsError) as info:
            normalize_tool_arguments(value)
        assert str(info.value) == ("tool arguments must be JSON-serializable (got a value "
                                   "JSON cannot represent)")


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(("value", "reason"), [
    ({1, 2}, "Object of type set is not JSON serializable"),
    ({"when": b"x"}, "Object of type bytes is not JSON serializable"),
    ({"x": math.nan}, "Out of range float values are not JSON compliant"),
    ([math.inf], "Out of range float values are not JSON compliant"),
    (_cycle(), "Circular reference detected"),
    ({(1, 2): 3}, "keys must be str, int, float, bool or None, not tuple"),
])
def test_a_value_json_cannot_encode(value: object, reason: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        normalize_tool_arguments(value)
    assert str(info.value).startswith("tool arguments must be JSON-serializable: ")
    assert reason in str(info.value)


def test_refused_arguments_use_up_no_sub_call_id() -> None:
    s = Session("s")
    run = CodeDispatcher("p", s)
    with pytest.raises(ToolArgumentsError):
        run.begin("t", {1, 2})
    with pytest.raises(ToolArgumentsError):
        run.begin("t")
    assert run.count == 0
    assert len(s.events) == 0
    assert run.begin("t", {}).sub_call_id == "p:code:1"


# --- the result summary --------------------------------------------------------------------


def test_summary_joins_blocks_and_names_non_text_ones() -> None:
    content: list[Any] = [text("one"), {"type": "image", "data": "..."}, TextBlock(text="two"),
                          ReasoningBlock(text="hidden"), text("")]
    assert summarize_tool_result(content) == "one\n[image content]\ntwo\n[reasoning content]\n"
    assert summarize_tool_result([]) == ""


def test_summary_bound_is_exactly_200() -> None:
    assert SUMMARY_MAX_CHARS == 200
    assert summarize_tool_result([text("y" * 200)]) == "y" * 200
    assert summarize_tool_result([text("y" * 201)]) == "y" * 200 + "…"
    # The join counts: two 100-char blocks make 201 characters.
    assert summarize_tool_result([text("a" * 100), text("b" * 100)]) == (
        "a" * 100 + "\n" + "b" * 99 + "…")


def test_summary_counts_utf16_units_as_javascript_does() -> None:
    emoji = "\U0001f600"  # two UTF-16 units
    assert summarize_tool_result([text(emoji * 100)]) == emoji * 100  # 200 units
    assert summarize_tool_result([text(emoji * 101)]) == emoji * 100 + "…"
    assert summarize_tool_result([text("é" * 150)]) == "é" * 150  # one unit each
    # A cut inside a pair ends before it (JavaScript would keep half of it).
    assert summarize_tool_result([text("x" * 199 + emoji)]) == "x" * 199 + "…"
    s = Session("s")
    run = CodeDispatcher("p", s)
    run.record(run.begin("t", {}), [text("x" * 199 + emoji * 3)], is_error=False)
    assert data(s)[0]["resultSummary"] == "x" * 199 + "…"


def test_repr() -> None:
    run = CodeDispatcher("p")
    run.begin("t", {})
    assert repr(run) == "<CodeDispatcher 'p' after 1 sub-calls>"
