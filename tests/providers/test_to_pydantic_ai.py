"""``to_pydantic_ai``: the derived history as pydantic-ai messages: they round-trip
through ``ModelMessagesTypeAdapter``, and pydantic-ai's offline ``TestModel`` takes them
as ``message_history`` (the corpus and generated histories: test_every_converter)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
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
from sdk_check import check_pydantic_ai, run_pydantic_ai

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import to_pydantic_ai


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
    check_pydantic_ai(out)
    run_pydantic_ai(out)


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
