"""``to_anthropic``: the derived history as the ``system`` and ``messages`` of
``messages.create``, checked against the ``anthropic`` SDK's request types over the whole
corpus and generated histories, with the alternation the API demands."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from corpus import corpus_failures
from hypothesis import given, settings
from sdk_check import check_anthropic
from to_strategies import histories

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import UnsupportedContentError, to_anthropic


def _alternates(kwargs: dict[str, Any]) -> None:
    roles = [m["role"] for m in kwargs["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for m in kwargs["messages"]:
        assert m["content"], m
        kinds = [b["type"] for b in m["content"]]
        if "tool_result" in kinds:  # the results first in their turn
            first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"),
                               len(kinds))
            assert "tool_result" not in kinds[first_other:], kinds
        for b in m["content"]:
            assert b["type"] != "text" or b["text"], m  # the API refuses empty text


def _valid(kwargs: dict[str, Any]) -> None:
    """The SDK's request types accept it, and the roles alternate as the API demands."""
    check_anthropic(kwargs)
    _alternates(kwargs)


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
    _alternates(out)


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


def test_the_whole_corpus_converts_validates_and_alternates() -> None:
    assert corpus_failures(lambda session: _valid(to_anthropic(session))) == []


@settings(max_examples=300, deadline=None)
@given(histories)
def test_any_history_validates_and_alternates(history: list[v.Message]) -> None:
    _valid(to_anthropic(history))
