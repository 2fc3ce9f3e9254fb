"""``to_openai_responses``: derived messages as OpenAI Responses ``input`` items.

Plain dicts of the shape of ``openai.types.responses.ResponseInputItemParam``; no SDK
needed.

The Responses input is a flat list of items, so block order is kept exactly:

- a system prompt is a ``message`` item of role ``system``;
- a user message's text and images are one ``message`` item (its text as a string when
  it is one text, else ``input_text`` and ``input_image`` parts), split around its tool
  results;
- an assistant's text blocks are ``message`` items of role ``assistant``, each call a
  ``function_call`` item (raw JSON arguments); reasoning the provider issued (a block
  with the provider's ``id``) is a ``reasoning`` item with that id, its text as the
  summary and its ``encrypted_content`` when kept, consecutive blocks of one id being
  the parts of one item; reasoning without an id is left out, as the API refuses an id
  it did not issue (HTTP 404 "Item with id ... not found");
- a tool result is a ``function_call_output`` item: its text, or its text and images as
  an output list.

What Responses cannot express follows docs/providers.md (a placeholder ``input_text``);
``strict=True`` raises :class:`UnsupportedContentError` instead.
"""

from __future__ import annotations

from typing import Any

from ..vocabulary import ImageBlock, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from . import _source as src
from ._openai_chat import image_url

__all__ = ["to_openai_responses"]

TARGET = "openai-responses"


def _unsupported(strict: bool, block: Any, index: int, what: str) -> str:
    if strict:
        raise src.UnsupportedContentError(TARGET, src.block_kind(block), index, what)
    return src.placeholder(block)


def _output(block: ToolResultBlock, index: int, strict: bool) -> dict[str, Any]:
    content = block.content
    if src.all_text(content):  # the common case, without the dispatch
        return {"type": "function_call_output", "call_id": block.tool_call_id,
                "output": content[0].text if len(content) == 1  # type: ignore[union-attr]
                else [{"type": "input_text", "text": b.text} for b in content]  # type: ignore[union-attr]
                if content else ""}
    parts: list[dict[str, Any]] = []
    images = False
    for b in src.blocks(block.content):
        if isinstance(b, TextBlock):
            parts.append({"type": "input_text", "text": b.text})
        elif isinstance(b, ImageBlock):
            images = True
            parts.append({"type": "input_image", "image_url": image_url(b), "detail": "auto"})
        else:
            parts.append({"type": "input_text", "text": _unsupported(
                strict, b, index, "this block in a tool result")})
    output: str | list[dict[str, Any]] = parts
    if not images and len(parts) <= 1:
        output = parts[0]["text"] if parts else ""
    return {"type": "function_call_output", "call_id": block.tool_call_id, "output": output}


def to_openai_responses(source: Any, *, strict: bool = False,
                        reasoning: bool = True) -> list[dict[str, Any]]:
    """The ``input`` of a Responses request (``client.responses.create(model=...,
    input=to_openai_responses(session))``).

    :param source: a :class:`~dsh_session_core.Session`, a sequence of derived messages,
        or their wire JSON as ``dsh-session derive`` prints it.
    :param strict: raise :class:`UnsupportedContentError` for a block Responses cannot
        express, instead of the documented fallback.
    :param reasoning: ``False`` leaves every ``reasoning`` item out, the provider's
        too (reasoning without the provider's id is left out either way: the API
        refuses an id it did not issue).
    """
    systems, messages = src.normalize(source)
    out: list[dict[str, Any]] = [{"type": "message", "role": "system", "content": s}
                                 for s in systems]
    append = out.append
    for index, message in enumerate(messages):
        role = message.role
        content: Any = message.content  # read by type below, hence Any
        if role == "user" and len(content) == 1:
            # Fast paths for the two commonest user messages: a prompt, a tool result.
            kind = type(content[0])
            if kind is TextBlock:
                append({"type": "message", "role": "user", "content": content[0].text})
                continue
            if kind is ToolResultBlock:
                append(_output(content[0], index, strict))
                continue
        if role == "assistant":
            item: dict[str, Any] | None = None  # the reasoning item a block may continue
            for b in src.blocks(content):
                if isinstance(b, TextBlock):
                    append({"type": "message", "role": "assistant", "content": b.text})
                elif isinstance(b, ToolCallBlock):
                    append({"type": "function_call", "call_id": b.id, "name": b.name,
                            "arguments": b.arguments})
                elif isinstance(b, ReasoningBlock) or src.block_kind(b) == "reasoning":
                    if reasoning:
                        item = _reasoning(b, index, strict, item, append)
                    continue
                else:
                    append({"type": "message", "role": "assistant",
                            "content": _unsupported(strict, b, index,
                                                    "this block in an assistant message")})
                item = None
            continue
        parts: list[dict[str, Any]] = []
        for b in src.blocks(content):
            if isinstance(b, TextBlock):
                parts.append({"type": "input_text", "text": b.text})
            elif isinstance(b, ToolResultBlock):
                if parts:
                    append({"type": "message", "role": role, "content": parts})
                    parts = []
                append(_output(b, index, strict))
            elif isinstance(b, ImageBlock) and role == "user":
                parts.append({"type": "input_image", "image_url": image_url(b),
                              "detail": "auto"})
            else:
                parts.append({"type": "input_text", "text": _unsupported(
                    strict, b, index, f"this block in a {role} message")})
        if parts or not content:
            one_text = len(parts) == 1 and parts[0]["type"] == "input_text"
            append({"type": "message", "role": role,
                    "content": parts[0]["text"] if one_text else parts or ""})
    return out


def _reasoning(block: Any, index: int, strict: bool, item: dict[str, Any] | None,
               append: Any) -> dict[str, Any] | None:
    """Send a reasoning block: a part of ``item`` (the reasoning item just sent) when it
    has that item's id, else a new ``reasoning`` item, appended; the block's text is a
    ``summary_text`` part (none when empty: a summary the model did not write), its
    ``encryptedContent`` the item's ``encrypted_content``. The item the next block may
    continue is returned; a block without the provider's id is left out (``strict``:
    :class:`UnsupportedContentError`)."""
    if isinstance(block, ReasoningBlock):
        rid: Any = block.id
        text: Any = block.text
        encrypted: Any = block.encrypted_content
    else:
        rid, text, encrypted = (block.get("id"), block.get("text", ""),
                                block.get("encryptedContent"))
    if not isinstance(rid, str):
        if strict:
            raise src.UnsupportedContentError(
                TARGET, "reasoning", index,
                "reasoning without the provider's id (a Responses reasoning item's)")
        return item
    if not isinstance(text, str):
        if strict:
            raise src.UnsupportedContentError(TARGET, "reasoning", index, "reasoning without text")
        text = src.placeholder(block)
    if item is None or item["id"] != rid:
        item = {"type": "reasoning", "id": rid, "summary": []}
        append(item)
    if text:
        item["summary"].append({"type": "summary_text", "text": text})
    if isinstance(encrypted, str) and "encrypted_content" not in item:
        item["encrypted_content"] = encrypted
    return item
