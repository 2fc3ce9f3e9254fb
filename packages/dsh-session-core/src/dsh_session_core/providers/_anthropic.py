"""``to_anthropic``: derived messages as Anthropic's ``system`` and ``messages`` arguments.

The keyword arguments ``system`` and ``messages`` of Anthropic's
``client.messages.create`` (plain dicts of the shape of ``anthropic.types.MessageParam``;
no SDK needed).

- the system prompt (a session's header ``system``, ``system`` messages) is ``system``:
  a string, or a list of text blocks when there are several; absent when there is none;
- roles alternate: consecutive user content (tool results, prompts, context and steering
  envelopes) is one user turn, consecutive assistant content one assistant turn;
- a tool call is a ``tool_use`` block whose ``input`` is the parsed arguments object;
- tool results are ``tool_result`` blocks (``is_error`` kept; one text is the string
  ``content``), first in their user turn;
- reasoning is a ``thinking`` block when the log kept the provider's signature (a
  reasoning block's ``signature``; ``redacted_data`` gives a ``redacted_thinking``
  block).

What Anthropic cannot express follows docs/providers.md; ``strict=True`` raises
:class:`UnsupportedContentError` instead of any fallback.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..vocabulary import ImageBlock, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from . import _source as src

__all__ = ["INVALID_ARGUMENTS_KEY", "to_anthropic", "tool_input"]

TARGET = "anthropic"
#: The ``input`` key holding a call's raw arguments when they are not a JSON object.
INVALID_ARGUMENTS_KEY = "_arguments"
#: The image types the Messages API takes.
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_decode = msgspec.json.decode



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
        raise src.UnsupportedContentError(TARGET, "tool-call", index,
                                      "tool-call arguments that are not a JSON object")
    return {INVALID_ARGUMENTS_KEY: arguments}


def _text(strict: bool, block: Any, index: int, what: str) -> dict[str, Any]:
    if strict:
        raise src.UnsupportedContentError(TARGET, src.block_kind(block), index, what)
    return {"type": "text", "text": src.placeholder(block)}


def _image(block: ImageBlock, index: int, strict: bool) -> dict[str, Any]:
    if isinstance(block.url, str):
        return {"type": "image", "source": {"type": "url", "url": block.url}}
    if block.media_type not in IMAGE_TYPES:
        return _text(strict, block, index, f"an image of type {block.media_type!r}")
    return {"type": "image", "source": {"type": "base64", "media_type": block.media_type,
                                        "data": block.data}}


def _tool_result(block: ToolResultBlock, index: int, strict: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_call_id}
    if src.all_text(block.content):  # the common case, without the dispatch
        texts = [b.text for b in block.content if b.text]  # type: ignore[union-attr]
        if len(texts) == 1:
            out["content"] = texts[0]  # the string form, as the API documents it
        elif texts:
            out["content"] = [{"type": "text", "text": t} for t in texts]
        if block.is_error is True or block.is_error is False:
            out["is_error"] = block.is_error
        return out
    content: list[dict[str, Any]] = []
    for b in src.blocks(block.content):
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


def _blocks_of(role: str, message_content: Any, index: int, strict: bool
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The general reading of a user or assistant message: its content blocks, and the
    tool results that go first in its user turn."""
    content: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    if role == "assistant":
        for b in src.blocks(message_content):
            if isinstance(b, TextBlock):
                if b.text:
                    content.append({"type": "text", "text": b.text})
            elif isinstance(b, ToolCallBlock):
                content.append({"type": "tool_use", "id": b.id, "name": b.name,
                                "input": tool_input(b.arguments, index, strict)})
            elif isinstance(b, ReasoningBlock) or src.block_kind(b) == "reasoning":
                signed = src.signature_of(b)
                if signed is None:
                    if strict:
                        raise src.UnsupportedContentError(
                            TARGET, "reasoning", index,
                            "reasoning without the provider's signature")
                elif signed[2] is not None:
                    content.append({"type": "redacted_thinking", "data": signed[2]})
                else:
                    content.append({"type": "thinking", "thinking": signed[0],
                                    "signature": signed[1]})
            else:
                content.append(_text(strict, b, index, "this block in an assistant message"))
        return content, results
    for b in src.blocks(message_content):
        if isinstance(b, TextBlock):
            if b.text:
                content.append({"type": "text", "text": b.text})
        elif isinstance(b, ToolResultBlock):
            results.append(_tool_result(b, index, strict))
        elif isinstance(b, ImageBlock):
            content.append(_image(b, index, strict))
        else:
            content.append(_text(strict, b, index, "this block in a user message"))
    return content, results


def to_anthropic(source: Any, *, strict: bool = False) -> dict[str, Any]:
    """``{"system": ..., "messages": [...]}``, the keyword arguments of a Messages request
    (``client.messages.create(model=..., max_tokens=..., **to_anthropic(session))``);
    ``system`` is absent when there is no system prompt.

    :param source: a :class:`~dsh_session_core.Session`, a sequence of derived messages,
        or their wire JSON as ``dsh-session derive`` prints it.
    :param strict: raise :class:`UnsupportedContentError` for what Anthropic cannot
        express, instead of the documented fallback.
    """
    systems, messages = src.normalize(source)
    system: list[str] = list(systems)
    turns: list[dict[str, Any]] = []
    add_turn = turns.append
    # The loop keeps the last turn's role and content list in locals, with ``head``, the
    # number of tool results at the start of that list (a user turn's results go first,
    # in their order). The common messages (a prompt, a tool result with one text, an
    # assistant's text and calls) are built inline, the rest by _blocks_of: this is the
    # hot path of every request, and one fewer container per message is a tenth of its
    # time (in allocation and in the collector's passes).
    last = ""
    current: list[dict[str, Any]] = []
    head = 0
    text_block, call_block, result_block = TextBlock, ToolCallBlock, ToolResultBlock
    for index, message in enumerate(messages):
        role = message.role
        content: Any = message.content  # read by type below, hence Any
        if role == "user" and len(content) == 1:
            first = content[0]
            kind = type(first)
            if kind is result_block:
                inner = first.content
                if len(inner) == 1 and type(inner[0]) is text_block and inner[0].text:
                    error = first.is_error
                    result = {"type": "tool_result", "tool_use_id": first.tool_call_id,
                              "content": inner[0].text, "is_error": error
                              } if error is True or error is False else {
                        "type": "tool_result", "tool_use_id": first.tool_call_id,
                        "content": inner[0].text}
                else:
                    result = _tool_result(first, index, strict)
                if last == "user":
                    current.insert(head, result)
                    head += 1
                else:
                    current = [result]
                    add_turn({"role": "user", "content": current})
                    head = 1
                    last = "user"
                continue
            if kind is text_block:
                text = first.text
                if text:
                    if last == "user":
                        current.append({"type": "text", "text": text})
                    else:
                        current = [{"type": "text", "text": text}]
                        add_turn({"role": "user", "content": current})
                        head = 0
                        last = "user"
                continue
        if role == "system":
            for b in src.blocks(content):
                if isinstance(b, TextBlock):
                    system.append(b.text)
                else:
                    system.append(_text(strict, b, index, "this block in a system prompt")
                                  ["text"])
            continue
        new: list[dict[str, Any]] | None = None
        if role == "assistant":
            if len(content) == 2:  # a text and a call: the commonest step, inline
                said, call = content
                if type(said) is text_block and type(call) is call_block and said.text:
                    try:
                        value = _decode(call.arguments)
                    except (msgspec.DecodeError, UnicodeEncodeError):
                        value = None
                    if type(value) is dict:
                        text_part = {"type": "text", "text": said.text}
                        use_part = {"type": "tool_use", "id": call.id, "name": call.name,
                                    "input": value}
                        if last == "assistant":
                            current.append(text_part)
                            current.append(use_part)
                        else:
                            current = [text_part, use_part]
                            add_turn({"role": "assistant", "content": current})
                            last = "assistant"
                        continue
            new = []
            for b in content:
                kind = type(b)
                if kind is text_block:
                    if b.text:
                        new.append({"type": "text", "text": b.text})
                elif kind is call_block:
                    arguments = b.arguments
                    try:
                        value = _decode(arguments)
                    except (msgspec.DecodeError, UnicodeEncodeError):
                        value = None
                    new.append({"type": "tool_use", "id": b.id, "name": b.name,
                                "input": value if type(value) is dict
                                else tool_input(arguments, index, strict)})
                else:
                    new = None  # another kind of block: the general reading
                    break
            if new:  # an assistant turn of its own, or more of the last one
                if last == "assistant":
                    current.extend(new)
                else:
                    current = new
                    add_turn({"role": "assistant", "content": new})
                    last = "assistant"
                continue
            if new is not None:
                continue  # nothing the API takes (an empty message)
        new, new_results = _blocks_of(role, content, index, strict)
        if not new and not new_results:
            continue  # nothing the API takes (empty, or only unsigned reasoning)
        if role == last:
            if new_results:
                current[head:head] = new_results
                head += len(new_results)
            current.extend(new)
        else:
            if new_results:
                new[:0] = new_results
            current = new
            head = len(new_results)
            add_turn({"role": role, "content": new})
            last = role
    out: dict[str, Any] = {}
    system = [s for s in system if s]
    if len(system) == 1:
        out["system"] = system[0]
    elif system:
        out["system"] = [{"type": "text", "text": s} for s in system]
    out["messages"] = turns
    return out
