"""``to_anthropic``: the derived history as the ``system`` and ``messages`` of
``messages.create``, checked against the ``anthropic`` SDK's request types and the
alternation the API demands (the corpus and generated histories: test_every_converter)."""

from __future__ import annotations

import pytest
from sdk_check import check_anthropic, check_anthropic_turns

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import UnsupportedContentError, to_anthropic


def test_a_tool_turn_alternates_with_results_first() -> None:
    signed = v.ReasoningBlock(text="think", signature="sig")
    history = [
        v.Message(role="system", content=(v.TextBlock(text="be brief"),)),
        v.Message(role="user", content=(v.TextBlock(text="hi"),)),
        v.Message(role="user", content=(v.TextBlock(text="<context source=\"plugin\">"),
                                      v.TextBlock(text="x"), v.TextBlock(text="</context>"))),
        v.Message(role="assistant", content=(
            signed, v.ReasoningBlock(text="unsigned"), v.TextBlock(text="Calling."),
            v.ToolCallBlock(id="c1", name="bash", arguments='{"cmd":"ls"}'),
            v.ToolCallBlock(id="c2", name="bash", arguments="not json"))),
        v.Message(role="user", content=(v.TextBlock(text="steer"),)),
        v.Message(role="user", content=(v.ToolResultBlock(
            tool_call_id="c1", content=(v.TextBlock(text="a.txt"),), is_error=False),)),
        v.Message(role="user", content=(v.ToolResultBlock(
            tool_call_id="c2", content=(v.ImageBlock(media_type="image/png", data="AAAA"),),
            is_error=True),)),
    ]
    out = to_anthropic(history)
    assert out == {"system": "be brief", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "hi"}, {"type": "text", "text": "<context source=\"plugin\">"},
            {"type": "text", "text": "x"}, {"type": "text", "text": "</context>"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "think", "signature": "sig"},
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "c1", "name": "bash", "input": {"cmd": "ls"}},
            {"type": "tool_use", "id": "c2", "name": "bash", "input": {"_arguments": "not json"}}]},
        {"role": "user", "content": [
            # One text is the string form of the content.
            {"type": "tool_result", "tool_use_id": "c1", "is_error": False, "content": "a.txt"},
            {"type": "tool_result", "tool_use_id": "c2", "is_error": True, "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "AAAA"}}]},
            {"type": "text", "text": "steer"}]},
    ]}
    check_anthropic(out)
    check_anthropic_turns(out)


def test_strict_refuses_unsigned_reasoning_and_invalid_arguments() -> None:
    with pytest.raises(UnsupportedContentError, match="signature"):
        to_anthropic([v.Message(role="assistant", content=(v.ReasoningBlock(text="r"),))],
                     strict=True)
    with pytest.raises(UnsupportedContentError, match="arguments"):
        to_anthropic([v.Message(role="assistant", content=(
            v.ToolCallBlock(id="c", name="n", arguments="[1]"),))], strict=True)


def test_no_system_prompt_no_system_key() -> None:
    assert to_anthropic([v.Message(role="user", content=(v.TextBlock(text="hi"),))]) == {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
