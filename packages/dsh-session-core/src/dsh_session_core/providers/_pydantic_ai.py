"""``to_pydantic_ai``: derived messages as pydantic-ai's ``ModelRequest``/``ModelResponse``.

Objects usable as ``message_history`` of ``Agent.run``.

pydantic-ai is imported when the function is called, never by core: without it, the call
raises :class:`ImportError` naming the package to install (``pydantic-ai-slim``).

- the system prompt is a ``SystemPromptPart`` at the start of the first request;
- user content is a request: text and images are ``UserPromptPart`` content (``str``,
  ``ImageUrl``, ``BinaryContent``), a tool result a ``ToolReturnPart`` whose
  ``tool_name`` is joined from its call (``outcome="failed"`` for an error result);
- assistant content is a response: ``TextPart``, ``ToolCallPart`` (raw JSON arguments),
  ``ThinkingPart``; reasoning the log kept the provider's data of is a ``ThinkingPart``
  as pydantic-ai's own model records it, so that its model sends it back: an Anthropic
  signature as ``signature`` (redacted thinking as ``id="redacted_thinking"`` and its
  data as ``signature``), ``provider_name="anthropic"``; a Responses reasoning item's
  id as ``id`` and encrypted content as ``signature``, ``provider_name="openai"``
  (pydantic-ai sends a signature back only to the provider named);
- consecutive messages of one side are one request (or response).

What pydantic-ai cannot express becomes a placeholder text (docs/providers.md);
``strict=True`` raises :class:`UnsupportedContentError` instead.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..vocabulary import ImageBlock, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from ._source import UnsupportedContentError, block_kind, blocks, normalize, placeholder

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["UNKNOWN_TOOL", "to_pydantic_ai"]

TARGET = "pydantic-ai"
#: The ``tool_name`` of a result whose call is not in the history.
UNKNOWN_TOOL = "unknown"


def _import() -> Any:
    try:
        from pydantic_ai import messages
    except ImportError as exc:
        msg = ("to_pydantic_ai needs pydantic-ai: pip install pydantic-ai-slim "
               "(or pydantic-ai)")
        raise ImportError(msg, name="pydantic_ai") from exc
    return messages


def to_pydantic_ai(source: Any, *, strict: bool = False) -> list[ModelMessage]:
    """pydantic-ai's message history of a source (``agent.run(prompt,
    message_history=to_pydantic_ai(session))``).

    :param source: a :class:`~dsh_session_core.Session`, a sequence of derived messages,
        or their wire JSON as ``dsh-session derive`` prints it.
    :param strict: raise :class:`UnsupportedContentError` for what pydantic-ai cannot
        express, instead of the documented fallback.
    :raises ImportError: pydantic-ai is not installed.
    """
    m = _import()
    systems, messages = normalize(source)
    UserPromptPart, TextPart, ToolCallPart = m.UserPromptPart, m.TextPart, m.ToolCallPart
    names: dict[str, str] = {}
    out: list[Any] = []
    parts: list[Any] = [m.SystemPromptPart(content=s) for s in systems]
    side = "request"

    def unsupported(block: Any, index: int, what: str) -> str:
        if strict:
            raise UnsupportedContentError(TARGET, block_kind(block), index, what)
        return placeholder(block)

    def media(block: ImageBlock, index: int) -> Any:
        if isinstance(block.url, str):
            return m.ImageUrl(url=block.url, media_type=block.media_type)
        try:
            data = base64.b64decode(block.data, validate=True)  # type: ignore[arg-type]
        except (binascii.Error, ValueError):
            return unsupported(block, index, "an image whose data is not base64")
        return m.BinaryContent(data=data, media_type=block.media_type)

    def flush(new_side: str) -> None:
        nonlocal parts, side
        if new_side != side:
            if parts:
                out.append(m.ModelRequest(parts=parts) if side == "request"
                           else m.ModelResponse(parts=parts))
            parts = []
            side = new_side

    for index, message in enumerate(messages):
        if message.role == "assistant":
            flush("response")
            for b in blocks(message.content):
                if isinstance(b, TextBlock):
                    parts.append(TextPart(content=b.text))
                elif isinstance(b, ToolCallBlock):
                    names[b.id] = b.name
                    parts.append(ToolCallPart(tool_name=b.name, args=b.arguments,
                                              tool_call_id=b.id))
                elif isinstance(b, ReasoningBlock):
                    parts.append(_thinking(m, b.text, b.signature, b.redacted_data, b.id,
                                           b.encrypted_content))
                elif (isinstance(b, Mapping) and b.get("type") == "reasoning"
                      and isinstance(b.get("text", ""), str)):
                    parts.append(_thinking(m, b.get("text", ""), b.get("signature"),
                                           b.get("redactedData"), b.get("id"),
                                           b.get("encryptedContent")))
                else:
                    parts.append(TextPart(content=unsupported(
                        b, index, "this block in an assistant message")))
            continue
        flush("request")
        if message.role == "system":
            for b in blocks(message.content):
                text = b.text if isinstance(b, TextBlock) else unsupported(
                    b, index, "this block in a system message")
                parts.append(m.SystemPromptPart(content=text))
            continue
        prompt: list[Any] = []
        for b in blocks(message.content):
            if isinstance(b, TextBlock):
                prompt.append(b.text)
            elif isinstance(b, ImageBlock):
                prompt.append(media(b, index))
            elif isinstance(b, ToolResultBlock):
                if prompt:
                    parts.append(UserPromptPart(content=prompt))
                    prompt = []
                parts.append(_tool_return(m, b, names, index, unsupported, media))
            else:
                prompt.append(unsupported(b, index, "this block in a user message"))
        if prompt or not message.content:
            parts.append(UserPromptPart(content=prompt))
    flush("")
    return out


#: pydantic-ai's ``ThinkingPart.id`` of Anthropic's redacted thinking (its data is the
#: part's ``signature``), as its Anthropic model records one.
REDACTED_THINKING_ID = "redacted_thinking"


def _thinking(m: Any, text: str, signature: Any, redacted: Any, rid: Any,
              encrypted: Any) -> Any:
    """A ``ThinkingPart``, with the provider's data as pydantic-ai's own models record it
    (see the module's doc)."""
    if isinstance(redacted, str):
        return m.ThinkingPart(content=text, id=REDACTED_THINKING_ID, signature=redacted,
                              provider_name="anthropic")
    if isinstance(signature, str):
        return m.ThinkingPart(content=text, signature=signature, provider_name="anthropic")
    if isinstance(rid, str) or isinstance(encrypted, str):
        return m.ThinkingPart(content=text, id=rid if isinstance(rid, str) else None,
                              signature=encrypted if isinstance(encrypted, str) else None,
                              provider_name="openai")
    return m.ThinkingPart(content=text)


def _tool_return(m: Any, block: ToolResultBlock, names: dict[str, str], index: int,
                 unsupported: Any, media: Any) -> Any:
    content: list[Any] = []
    for b in blocks(block.content):
        if isinstance(b, TextBlock):
            content.append(b.text)
        elif isinstance(b, ImageBlock):
            content.append(media(b, index))
        else:
            content.append(unsupported(b, index, "this block in a tool result"))
    value: Any = content[0] if len(content) == 1 and isinstance(content[0], str) else content
    return m.ToolReturnPart(tool_name=names.get(block.tool_call_id, UNKNOWN_TOOL),
                            content=value, tool_call_id=block.tool_call_id,
                            outcome="failed" if block.is_error is True else "success")
