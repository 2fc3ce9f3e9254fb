"""``to_anthropic``: derived messages as the keyword arguments ``system`` and ``messages``
of Anthropic's ``client.messages.create`` (plain dicts of the shape of
``anthropic.types.MessageParam``; no SDK needed).

- the system prompt (a session's header ``system``, ``system`` messages) is ``system``:
  a string, or a list of text blocks when there are several; absent when there is none;
- roles alternate: consecutive user content (tool results, prompts, context and steering
  envelopes) is one user turn, consecutive assistant content one assistant turn;
- a tool call is a ``tool_use`` block whose ``input`` is the parsed arguments object;
- tool results are ``tool_result`` blocks (``is_error`` kept), first in their user turn;
- reasoning is a ``thinking`` block when the log kept the provider's signature (an
  untyped reasoning block with ``signature``; ``redactedData`` gives a
  ``redacted_thinking`` block).

What Anthropic cannot express follows docs/providers.md; ``strict=True`` raises
:class:`UnsupportedContentError` instead of any fallback.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..vocabulary import ImageBlock, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from ._source import (
    UnsupportedContentError,
    all_text,
    block_kind,
    blocks,
    normalize,
    placeholder,
    signature_of,
)

__all__ = ["INVALID_ARGUMENTS_KEY", "to_anthropic", "tool_input"]

TARGET = "anthropic"
#: The ``input`` key holding a call's raw arguments when they are not a JSON object.
INVALID_ARGUMENTS_KEY = "_arguments"
#: The image types the Messages API takes.
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_decode = msgspec.json.decode
#: The block types of an assistant message the fast path of :func:`to_anthropic` takes.
_PLAIN_ASSISTANT = frozenset({TextBlock, ToolCallBlock})


def tool_input(arguments: str, index: int = 0, strict: bool = False) -> dict[str, Any]:
    """A call's ``input`` object: its parsed arguments; ``{}`` for empty arguments; for
    arguments that are not a JSON object, ``{"_arguments": <the raw text>}`` (with
    ``strict``, :class:`UnsupportedContentError`)."""
    try:
        value = _decode(arguments)
    except (msgspec.DecodeError, UnicodeEncodeError):
        if not arguments.strip():
            return {}
        value = None
    if type(value) is dict:
        return value
    if strict:
        raise UnsupportedContentError(TARGET, "tool-call", index,
                                      "tool-call arguments that are not a JSON object")
    return {INVALID_ARGUMENTS_KEY: arguments}


def _text(strict: bool, block: Any, index: int, what: str) -> dict[str, Any]:
    if strict:
        raise UnsupportedContentError(TARGET, block_kind(block), index, what)
    return {"type": "text", "text": placeholder(block)}


def _image(block: ImageBlock, index: int, strict: bool) -> dict[str, Any]:
    if isinstance(block.url, str):
        return {"type": "image", "source": {"type": "url", "url": block.url}}
    if block.media_type not in IMAGE_TYPES:
        return _text(strict, block, index, f"an image of type {block.media_type!r}")
    return {"type": "image", "source": {"type": "base64", "media_type": block.media_type,
                                        "data": block.data}}


def _tool_result(block: ToolResultBlock, index: int, strict: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_call_id}
    if all_text(block.content):  # the common case, without the dispatch
        texts = [{"type": "text", "text": b.text} for b in block.content if b.text]  # type: ignore[union-attr]
        if texts:
            out["content"] = texts
        if block.is_error is True or block.is_error is False:
            out["is_error"] = block.is_error
        return out
    content: list[dict[str, Any]] = []
    for b in blocks(block.content):
        if isinstance(b, TextBlock):
            if b.text:
                content.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            content.append(_image(b, index, strict))
        else:
            content.append(_text(strict, b, index, "this block in a tool result"))
    if content:
        out["content"] = content
    if isinstance(block.is_error, bool):
        out["is_error"] = block.is_error
    return out


def to_anthropic(source: Any, *, strict: bool = False) -> dict[str, Any]:
    """``{"system": ..., "messages": [...]}``, the keyword arguments of a Messages request
    (``client.messages.create(model=..., max_tokens=..., **to_anthropic(session))``);
    ``system`` is absent when there is no system prompt.

    :param source: a :class:`~dsh_session_core.Session`, a sequence of derived messages,
        or their wire JSON as ``dsh-session derive`` prints it.
    :param strict: raise :class:`UnsupportedContentError` for what Anthropic cannot
        express, instead of the documented fallback.
    """
    systems, messages = normalize(source)
    system: list[str] = list(systems)
    turns: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []  # the tool results of the last (user) turn
    last = ""
    for index, message in enumerate(messages):
        role = message.role
        if role == "user" and len(message.content) == 1:
            # Fast paths for the two commonest user messages: a tool result, a prompt.
            first = message.content[0]
            kind = type(first)
            if kind is ToolResultBlock:
                inner = first.content  # type: ignore[union-attr]
                if len(inner) == 1 and type(inner[0]) is TextBlock and inner[0].text:
                    # The commonest result, one text, without the calls of _tool_result.
                    result = {"type": "tool_result",
                              "tool_use_id": first.tool_call_id,  # type: ignore[union-attr]
                              "content": [{"type": "text", "text": inner[0].text}]}
                    error = first.is_error  # type: ignore[union-attr]
                    if error is True or error is False:
                        result["is_error"] = error
                else:
                    result = _tool_result(first, index, strict)  # type: ignore[arg-type]
                if last == "user":
                    results.append(result)
                else:
                    turns.append({"role": "user", "content": []})
                    results = [result]
                    last = "user"
                continue
            if kind is TextBlock:
                if first.text:  # type: ignore[union-attr]
                    text = {"type": "text", "text": first.text}  # type: ignore[union-attr]
                    if last == "user":
                        turns[-1]["content"].append(text)
                    else:
                        turns.append({"role": "user", "content": [text]})
                        results = []
                        last = "user"
                continue
        if role == "system":
            for b in blocks(message.content):
                if isinstance(b, TextBlock):
                    system.append(b.text)
                else:
                    system.append(_text(strict, b, index, "this block in a system prompt")
                                  ["text"])
            continue
        content: list[dict[str, Any]] = []
        new_results: list[dict[str, Any]] = []
        if role == "assistant" and _PLAIN_ASSISTANT.issuperset(map(type, message.content)):
            # Fast path for the commonest reply: text and tool calls only.
            for b in message.content:
                if type(b) is TextBlock:
                    if b.text:
                        content.append({"type": "text", "text": b.text})
                else:
                    content.append({"type": "tool_use", "id": b.id,  # type: ignore[union-attr]
                                    "name": b.name,  # type: ignore[union-attr]
                                    "input": tool_input(b.arguments, index, strict)})  # type: ignore[union-attr]
        elif role == "assistant":
            for b in blocks(message.content):
                if isinstance(b, TextBlock):
                    if b.text:
                        content.append({"type": "text", "text": b.text})
                elif isinstance(b, ToolCallBlock):
                    content.append({"type": "tool_use", "id": b.id, "name": b.name,
                                    "input": tool_input(b.arguments, index, strict)})
                elif isinstance(b, ReasoningBlock) or (
                        block_kind(b) == "reasoning" and signature_of(b) is None):
                    if strict:
                        raise UnsupportedContentError(
                            TARGET, "reasoning", index,
                            "reasoning without the provider's signature")
                else:
                    signed = signature_of(b)
                    if signed is None:
                        content.append(_text(strict, b, index,
                                             "this block in an assistant message"))
                    elif signed[2] is not None:
                        content.append({"type": "redacted_thinking", "data": signed[2]})
                    else:
                        content.append({"type": "thinking", "thinking": signed[0],
                                        "signature": signed[1]})
        else:
            for b in blocks(message.content):
                if isinstance(b, TextBlock):
                    if b.text:
                        content.append({"type": "text", "text": b.text})
                elif isinstance(b, ToolResultBlock):
                    new_results.append(_tool_result(b, index, strict))
                elif isinstance(b, ImageBlock):
                    content.append(_image(b, index, strict))
                else:
                    content.append(_text(strict, b, index, "this block in a user message"))
        if not content and not new_results:
            continue  # nothing the API takes (empty, or only unsigned reasoning)
        if role == last:
            turns[-1]["content"].extend(content)
        else:
            if last == "user" and results:
                turns[-1]["content"][:0] = results
            results = []
            turns.append({"role": role, "content": content})
            last = role
        results.extend(new_results)
    if last == "user" and results:
        turns[-1]["content"][:0] = results
    out: dict[str, Any] = {}
    system = [s for s in system if s]
    if len(system) == 1:
        out["system"] = system[0]
    elif system:
        out["system"] = [{"type": "text", "text": s} for s in system]
    out["messages"] = turns
    return out
