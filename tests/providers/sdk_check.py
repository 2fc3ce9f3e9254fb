"""The providers' own SDK request types, as validators of the converted payloads.

Each check runs pydantic's ``TypeAdapter`` over the SDK's TypedDicts with
``extra="forbid"`` (a TypedDict adapter otherwise ignores unknown keys), drains every
lazily validated ``Iterable`` field (pydantic checks its items only as it is iterated),
and compares the validated value with the payload: a key dropped or a value coerced by
a union member that does not really fit is a failure too.

Beyond the types: :func:`check_anthropic_turns` checks the alternation the Messages API
demands, :func:`run_pydantic_ai` that pydantic-ai's offline ``TestModel`` takes a history.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import ConfigDict, TypeAdapter

__all__ = [
    "check_anthropic",
    "check_anthropic_turns",
    "check_chat",
    "check_pydantic_ai",
    "check_responses",
    "run_pydantic_ai",
]

_FORBID = ConfigDict(extra="forbid")


def _drain(value: Any) -> Any:
    """The validated value with every lazy validator iterated into a list."""
    if isinstance(value, Mapping):
        return {k: _drain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_drain(v) for v in value]
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [_drain(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@functools.cache
def _adapter(name: str) -> TypeAdapter[Any]:
    if name == "chat":
        from openai.types.chat import ChatCompletionMessageParam

        return TypeAdapter(list[ChatCompletionMessageParam], config=_FORBID)
    if name == "responses":
        from openai.types.responses import ResponseInputItemParam

        return TypeAdapter(list[ResponseInputItemParam], config=_FORBID)
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    # In a list: the config of an adapter of a bare TypedDict would be refused.
    return TypeAdapter(list[MessageCreateParamsNonStreaming], config=_FORBID)


def _check(name: str, payload: Any) -> None:
    validated = _drain(_adapter(name).validate_python(payload))
    assert validated == _plain(payload), f"{name}: the SDK type changed the payload"


def check_chat(messages: list[dict[str, Any]]) -> None:
    """``messages`` validates as ``list[openai.types.chat.ChatCompletionMessageParam]``."""
    _check("chat", messages)


def check_responses(items: list[dict[str, Any]]) -> None:
    """``items`` validates as ``list[openai.types.responses.ResponseInputItemParam]``."""
    _check("responses", items)


def check_anthropic(kwargs: dict[str, Any]) -> None:
    """``kwargs``, with a model and ``max_tokens``, validates as the SDK's
    ``MessageCreateParamsNonStreaming`` (its ``messages`` as ``MessageParam``)."""
    _check("anthropic", [{"model": "claude-sonnet-4-5", "max_tokens": 1024, **kwargs}])


def check_pydantic_ai(history: list[Any]) -> None:
    """``history`` round-trips through ``ModelMessagesTypeAdapter``: its JSON loads, and
    dumps back to the same JSON (loading narrows an image's ``BinaryContent`` to
    ``BinaryImage``, so the objects are compared through their dumps)."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter as Adapter

    dumped = Adapter.dump_json(history)
    assert Adapter.dump_json(Adapter.validate_json(dumped)) == dumped
    assert Adapter.dump_json(Adapter.validate_python(Adapter.dump_python(history))) == dumped


def check_anthropic_turns(kwargs: dict[str, Any]) -> None:
    """The roles alternate, no message or text block is empty, and a turn's tool results
    come before anything else in it: what the Messages API refuses otherwise."""
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


def run_pydantic_ai(history: list[Any]) -> None:
    """The offline model accepts the history. A history ending in calls with no result
    is run without its last response: with a new prompt pydantic-ai refuses pending
    calls (that response is checked by the type adapter all the same)."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.test import TestModel

    last = history[-1] if history else None
    if isinstance(last, ModelResponse) and any(isinstance(p, ToolCallPart) for p in last.parts):
        history = history[:-1]
    # asyncio.run, not run_sync: run_sync leaves its event loop open for the process.
    result = asyncio.run(Agent(TestModel()).run("continue", message_history=history))
    assert isinstance(result.output, str)
