"""``to_openai_chat``: derived messages as OpenAI Chat Completions ``messages``.

Plain dicts of the shape of ``openai.types.chat.ChatCompletionMessageParam``; no SDK
needed.

- a system prompt (a session's header ``system``, a ``system`` message) is a ``system``
  message;
- a user message is its text (a string) when it has one text, else ``text`` and
  ``image_url`` parts;
- an assistant's text is its ``content``, its calls its ``tool_calls`` (arguments kept as
  the model's raw JSON text);
- a tool result is a ``role: "tool"`` message; its images, which a tool message cannot
  carry, go to a ``user`` message right after the run of tool messages.

What Chat Completions cannot express follows docs/providers.md: reasoning is left out
(the API takes no reasoning back), anything else becomes a placeholder text part;
``strict=True`` raises :class:`UnsupportedContentError` instead.
"""

from __future__ import annotations

from typing import Any

from ..vocabulary import ImageBlock, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from . import _source as src

__all__ = ["image_url", "to_openai_chat"]

TARGET = "openai-chat"


def image_url(block: ImageBlock) -> str:
    """An image block as a URL: its ``url``, or a ``data:`` URL of its base64 data."""
    if isinstance(block.url, str):
        return block.url
    return f"data:{block.media_type};base64,{block.data}"


def _unsupported(strict: bool, block: Any, index: int, what: str) -> dict[str, Any]:
    if strict:
        raise src.UnsupportedContentError(TARGET, src.block_kind(block), index, what)
    return {"type": "text", "text": src.placeholder(block)}


def _tool_message(block: ToolResultBlock, index: int, strict: bool,
                  images: list[dict[str, Any]]) -> dict[str, Any]:
    content = block.content
    if src.all_text(content):  # the common case, without the dispatch
        if len(content) == 1:
            return {"role": "tool", "tool_call_id": block.tool_call_id,
                    "content": content[0].text}  # type: ignore[union-attr]
        return {"role": "tool", "tool_call_id": block.tool_call_id,
                "content": [{"type": "text", "text": b.text} for b in content]}  # type: ignore[union-attr]
    parts: list[dict[str, Any]] = []
    moved = False
    for b in src.blocks(block.content):
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            if not moved:
                images.append({"type": "text", "text": "The images of the result of tool "
                               f"call {block.tool_call_id}:"})
                moved = True
            images.append({"type": "image_url", "image_url": {"url": image_url(b)}})
        else:
            parts.append(_unsupported(strict, b, index, "this block in a tool result"))
    out: str | list[dict[str, Any]]
    if len(parts) == 1:
        out = parts[0]["text"]
    elif parts:
        out = parts
    else:
        out = "(the images follow in the next message)" if moved else ""
    return {"role": "tool", "tool_call_id": block.tool_call_id, "content": out}


def to_openai_chat(source: Any, *, strict: bool = False) -> list[dict[str, Any]]:
    """The ``messages`` of a Chat Completions request (``client.chat.completions.create(
    model=..., messages=to_openai_chat(session))``).

    :param source: a :class:`~dsh_session_core.Session`, a sequence of derived messages,
        or their wire JSON as ``dsh-session derive`` prints it.
    :param strict: raise :class:`UnsupportedContentError` for a block Chat Completions
        cannot express, instead of the documented fallback.
    """
    systems, messages = src.normalize(source)
    out: list[dict[str, Any]] = [{"role": "system", "content": s} for s in systems]
    append = out.append
    images: list[dict[str, Any]] = []  # moved out of the current run of tool messages
    for index, message in enumerate(messages):
        role = message.role
        content = message.content
        if role == "user" and len(content) == 1 and not images:
            # Fast paths for the two commonest user messages: a tool result, a prompt.
            first = content[0]
            kind = type(first)
            if kind is ToolResultBlock:
                append(_tool_message(first, index, strict, images))  # type: ignore[arg-type]
                continue
            if kind is TextBlock:
                append({"role": "user", "content": first.text})  # type: ignore[union-attr]
                continue
        if role == "assistant":
            if images:
                append({"role": "user", "content": images})
                images = []
            if len(content) == 2 and type(content[0]) is TextBlock and type(
                    content[1]) is ToolCallBlock:
                # Fast path for the commonest reply: a text, then a call.
                call: Any = content[1]
                append({"role": "assistant", "content": content[0].text,
                        "tool_calls": [{"id": call.id, "type": "function", "function": {
                            "name": call.name, "arguments": call.arguments}}]})
                continue
            texts: list[dict[str, Any]] = []
            calls: list[dict[str, Any]] = []
            for b in src.blocks(content):
                if isinstance(b, TextBlock):
                    texts.append({"type": "text", "text": b.text})
                elif isinstance(b, ToolCallBlock):
                    calls.append({"id": b.id, "type": "function",
                                  "function": {"name": b.name,
                                               "arguments": b.arguments}})
                elif isinstance(b, ReasoningBlock) or src.block_kind(b) == "reasoning":
                    if strict:
                        raise src.UnsupportedContentError(TARGET, "reasoning", index,
                                                      "reasoning (it takes none back)")
                else:
                    texts.append(_unsupported(strict, b, index, "this block in an "
                                              "assistant message"))
            if not texts and not calls:
                continue  # only reasoning, left out: nothing to send
            msg: dict[str, Any] = {"role": "assistant"}
            if len(texts) == 1:
                msg["content"] = texts[0]["text"]
            elif texts:
                msg["content"] = texts
            if calls:
                msg["tool_calls"] = calls
            append(msg)
            continue
        parts: list[dict[str, Any]] = []
        for b in src.blocks(content):
            if isinstance(b, TextBlock):
                parts.append({"type": "text", "text": b.text})
            elif isinstance(b, ToolResultBlock):
                if parts:
                    append({"role": role, "content": parts})
                    parts = []
                append(_tool_message(b, index, strict, images))
                continue
            elif isinstance(b, ImageBlock) and role == "user":
                parts.append({"type": "image_url", "image_url": {"url": image_url(b)}})
            else:
                parts.append(_unsupported(strict, b, index, f"this block in a {role} message"))
            if images:
                append({"role": "user", "content": images})
                images = []
        if parts:
            one_text = len(parts) == 1 and parts[0]["type"] == "text"
            append({"role": "system" if role == "system" else "user",
                    "content": parts[0]["text"] if one_text else parts})
        elif not content:
            append({"role": role, "content": ""})
    if images:
        append({"role": "user", "content": images})
    return out
