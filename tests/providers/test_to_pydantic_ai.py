"""``to_pydantic_ai``: the derived history as pydantic-ai messages: they round-trip
through ``ModelMessagesTypeAdapter``, and pydantic-ai's offline ``TestModel`` takes them
as ``message_history``, over the whole corpus and generated histories."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from corpus import corpus_failures
from hypothesis import given, settings
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel
from sdk_check import check_pydantic_ai
from to_strategies import histories

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import to_pydantic_ai


def _run(history: list[Any]) -> None:
    """The offline model accepts the history. A history ending in calls with no result
    is run without its last response: with a new prompt pydantic-ai refuses pending
    calls (that response is checked by the type adapter all the same)."""
    last = history[-1] if history else None
    if isinstance(last, ModelResponse) and any(isinstance(p, ToolCallPart) for p in last.parts):
        history = history[:-1]
    # asyncio.run, not run_sync: run_sync leaves its event loop open for the process.
    result = asyncio.run(Agent(TestModel()).run("continue", message_history=history))
    assert isinstance(result.output, str)


def _round_trips(history: list[Any]) -> None:
    """pydantic-ai's type adapter takes the history back, and the offline model runs it."""
    check_pydantic_ai(history)
    _run(history)


def _shape(history: list[Any]) -> list[tuple[str, list[Any]]]:
    """Kinds and contents, without the timestamps the parts are stamped with."""
    out = []
    for message in history:
        parts = []
        for p in message.parts:
            fields = {k: getattr(p, k) for k in ("content", "tool_name", "args",
                                                  "tool_call_id", "signature", "outcome")
                      if hasattr(p, k)}
            parts.append((type(p).__name__, fields))
        out.append((type(message).__name__, parts))
    return out


def test_a_tool_turn() -> None:
    history = [
        v.Message(role="system", content=(v.TextBlock(text="be brief"),)),
        v.Message(role="user", content=(v.TextBlock(text="hi"),
                                      v.ImageBlock(media_type="image/png", data="AAAA"))),
        v.Message(role="assistant", content=(
            v.ReasoningBlock(text="plan"), v.TextBlock(text="Calling."),
            v.ToolCallBlock(id="c1", name="bash", arguments='{"cmd":"ls"}'))),
        v.Message(role="user", content=(v.ToolResultBlock(
            tool_call_id="c1", content=(v.TextBlock(text="boom"),), is_error=True),)),
    ]
    out = to_pydantic_ai(history)
    expected = [
        ModelRequest(parts=[SystemPromptPart(content="be brief"), UserPromptPart(
            content=["hi", BinaryContent(data=b"\x00\x00\x00", media_type="image/png")])]),
        ModelResponse(parts=[ThinkingPart(content="plan"), TextPart(content="Calling."),
                             ToolCallPart(tool_name="bash", args='{"cmd":"ls"}',
                                          tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart(tool_name="bash", content="boom",
                                           tool_call_id="c1", outcome="failed")]),
    ]
    assert _shape(out) == _shape(expected)
    _round_trips(out)


@pytest.mark.parametrize("block", [
    v.ReasoningBlock(text="t", signature="sig"),
    {"type": "reasoning", "text": "t", "signature": "sig"},  # as an untyped source has it
], ids=["typed", "untyped"])
def test_a_signed_reasoning_block_keeps_its_signature(block: Any) -> None:
    out = to_pydantic_ai([v.Message(role="assistant", content=(block,))])
    assert _shape(out) == [("ModelResponse", [("ThinkingPart", {"content": "t",
                                                                "signature": "sig"})])]


def test_without_pydantic_ai_the_error_names_the_package() -> None:
    code = ("import sys; sys.modules['pydantic_ai'] = None\n"
            "from dsh_session_core.providers import to_pydantic_ai\n"
            "try:\n    to_pydantic_ai([])\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "pip install pydantic-ai-slim" in out


def test_core_imports_no_sdk() -> None:
    code = ("import sys\nimport dsh_session_core.providers as p\n"
            "p.to_openai_chat([]); p.to_openai_responses([]); p.to_anthropic([])\n"
            "print(sorted(m for m in ('openai', 'anthropic', 'pydantic', 'pydantic_ai')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_the_whole_corpus_round_trips_and_runs() -> None:
    assert corpus_failures(lambda session: _round_trips(to_pydantic_ai(session))) == []


@settings(max_examples=200, deadline=None)
@given(histories)
def test_any_history_round_trips(history: list[v.Message]) -> None:
    check_pydantic_ai(to_pydantic_ai(history))
