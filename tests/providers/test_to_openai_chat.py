"""``to_openai_chat``: the derived history as Chat Completions messages, checked against
the ``openai`` SDK's own request types (``ChatCompletionMessageParam``; the corpus and
generated histories: test_every_converter)."""

from __future__ import annotations

import pytest
from sdk_check import check_chat

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import UnsupportedContentError, to_openai_chat

PNG = v.ImageBlock(media_type="image/png", data="iVBORw0KGgo=")


def test_a_tool_turn() -> None:
    history = [
        v.Message(role="user", content=(v.TextBlock(text="list"), PNG)),
        v.Message(role="assistant", content=(
            v.ReasoningBlock(text="use ls"), v.TextBlock(text="Listing."),
            v.ToolCallBlock(id="c1", name="bash", arguments='{"cmd":"ls"}'),
            v.ToolCallBlock(id="c2", name="shot", arguments="{}"))),
        v.Message(role="user", content=(v.ToolResultBlock(
            tool_call_id="c1", content=(v.TextBlock(text="a.txt"),), is_error=False),)),
        v.Message(role="user", content=(v.ToolResultBlock(
            tool_call_id="c2", content=(v.TextBlock(text="here"), PNG), is_error=True),)),
        v.Message(role="user", content=(v.TextBlock(text="thanks"),)),
    ]
    out = to_openai_chat(history)
    assert out == [
        {"role": "user", "content": [
            {"type": "text", "text": "list"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
        {"role": "assistant", "content": "Listing.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash",
                                                          "arguments": '{"cmd":"ls"}'}},
            {"id": "c2", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "c2", "content": "here"},
        # The image a tool message cannot carry: after the run of tool messages.
        {"role": "user", "content": [
            {"type": "text", "text": "The images of the result of tool call c2:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
        # One text is the string form of the content.
        {"role": "user", "content": "thanks"},
    ]
    check_chat(out)


def test_reasoning_only_is_left_out_and_strict_refuses_it() -> None:
    history = [v.Message(role="assistant", content=(v.ReasoningBlock(text="hm"),))]
    assert to_openai_chat(history) == []
    with pytest.raises(UnsupportedContentError) as info:
        to_openai_chat(history, strict=True)
    assert (info.value.target, info.value.kind, info.value.index) == (
        "openai-chat", "reasoning", 0)


def test_an_unknown_block_is_a_placeholder_text() -> None:
    history = [v.Message(role="assistant", content=({"type": "thinking", "x": 1},))]  # type: ignore[arg-type]
    assert to_openai_chat(history) == [{"role": "assistant", "content":
                                        '<block type="thinking">{"type":"thinking","x":1}</block>'}]


def test_the_session_system_prompt_comes_first() -> None:
    from dsh_session_core import Session

    s = Session("s")
    s.append("request/header", {"header": {"config": {"model": "m"}, "system": "be brief"},
                                "reason": "initial"})
    with s.turn() as turn:
        turn.user("hi")
    assert to_openai_chat(s) == [{"role": "system", "content": "be brief"},
                                 {"role": "user", "content": "hi"}]
