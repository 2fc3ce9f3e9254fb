"""What every ``to_*`` conversion starts from: the source normalized to a system prompt and
a list of derived :class:`~dsh_session_core.vocabulary.Message` values, the reading of
untyped (opaque) blocks, the placeholder text of a block a target cannot express, and
:class:`UnsupportedContentError`.

A source is a :class:`~dsh_session_core.Session` (its request header's ``system`` and
``messagePrefix``, then ``derive_messages()``: the request the loop builds), a sequence of
derived messages, or their wire JSON as ``dsh-session derive`` prints it (parsed, or as
``str``/``bytes``). Nothing here imports a provider SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec

from .._json import JsonObject, thaw
from ..errors import DshSessionError
from ..vocabulary import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

if TYPE_CHECKING:
    from .._session import Session

__all__ = [
    "Block",
    "Source",
    "UnsupportedContentError",
    "all_text",
    "block_kind",
    "blocks",
    "normalize",
    "placeholder",
    "signature_of",
]

#: What a conversion accepts.
Source: TypeAlias = "Session | Sequence[Message] | Sequence[Mapping[str, Any]] | str | bytes"
#: A block as a conversion sees it: typed, or an untyped mapping no schema fits.
Block: TypeAlias = "ContentBlock | Mapping[str, Any]"

_TYPED = (TextBlock, ReasoningBlock, ToolCallBlock, ToolResultBlock, ImageBlock)
_TYPED_SET = frozenset(_TYPED)
_TEXT_SET = frozenset({TextBlock})
_KNOWN = frozenset({"text", "reasoning", "tool-call", "tool-result", "image"})
_messages = msgspec.json.Decoder(list[Message])
_any = msgspec.json.Decoder()


class UnsupportedContentError(DshSessionError, ValueError):
    """A block the target cannot express, met by a conversion called with ``strict=True``
    (without it, the documented fallback applies: see docs/providers.md).

    :ivar target: the conversion (``"openai-chat"``, ``"anthropic"``...).
    :ivar kind: the block's kind (``"reasoning"``, or an unknown kind's ``type``).
    :ivar index: the index of the message holding it, in the converted source.
    """

    def __init__(self, target: str, kind: str, index: int, what: str) -> None:
        self.target = target
        self.kind = kind
        self.index = index
        super().__init__(
            f"{target} cannot express {what} (a {kind!r} block of message {index}): "
            "call without strict=True for the documented fallback (docs/providers.md)"
        )


def _block(value: Any) -> Block:
    """A mapping block typed when a schema fits it, else kept as it is (opaque).

    A ``tool-result`` mapping whose nested content holds an opaque block keeps its own
    shape typed and its content normalized block by block.
    """
    if not isinstance(value, Mapping):
        return {"type": None, "value": thaw(value)}
    kind = value.get("type")
    if kind not in _KNOWN:
        return value
    plain = thaw(value) if isinstance(value, JsonObject) else value
    try:
        typed: Block = msgspec.convert(plain, ContentBlock)
        return typed
    except (msgspec.ValidationError, TypeError):
        pass
    if kind == "tool-result":
        call_id, content = value.get("toolCallId"), value.get("content", ())
        is_error = value.get("isError", msgspec.UNSET)
        if (isinstance(call_id, str) and isinstance(content, Sequence)
                and not isinstance(content, str) and type(is_error) in (bool, msgspec.UnsetType)):
            # The content is as untyped as the block's: read block by block as well.
            inner: Any = tuple(map(_block, content))
            return ToolResultBlock(tool_call_id=call_id, content=inner, is_error=is_error)
    return value


def blocks(content: Sequence[Any]) -> Sequence[Block]:
    """A message's content with every untyped block read by :func:`_block` (the content
    itself when every block is typed, as derived content nearly always is)."""
    if _TYPED_SET.issuperset(map(type, content)):
        return content
    read: list[Block] = []
    for x in content:
        read.append(x if isinstance(x, _TYPED) else _block(x))
    return read


def all_text(content: Sequence[Any]) -> bool:
    """Whether every block of ``content`` is a text block (the common tool result)."""
    return _TEXT_SET.issuperset(map(type, content))


def _from_wire(items: Sequence[Any]) -> list[Message]:
    try:
        return msgspec.convert(items, list[Message])
    except (msgspec.ValidationError, TypeError):
        pass
    out = []
    for i, m in enumerate(items):
        if isinstance(m, Message):
            out.append(m)
            continue
        if not isinstance(m, Mapping) or m.get("role") not in ("system", "user", "assistant"):
            msg = f"message {i} is not a derived message (a role and a content array): {m!r}"
            raise TypeError(msg)
        content = m.get("content", ())
        if isinstance(content, str) or not isinstance(content, Sequence):
            msg = f"message {i} has no content array: {m!r}"
            raise TypeError(msg)
        read: Any = tuple(map(_block, content))
        out.append(Message(role=m["role"], content=read))
    return out


def normalize(source: Any) -> tuple[list[str], list[Message]]:
    """The system prompt texts and the messages of a source (see the module's doc).

    :raises TypeError: the source is none of the accepted kinds.
    """
    from .._session import Session

    if isinstance(source, Session):
        header = source.request_header()
        systems: list[str] = []
        messages: list[Message] = []
        if header is not None:
            system = header.get("system")
            if isinstance(system, str) and system:
                systems.append(system)
            prefix = header.get("messagePrefix")
            if isinstance(prefix, tuple) and prefix:
                messages = _from_wire([thaw(m) for m in prefix])
        messages.extend(source.derive_messages())
        return systems, messages
    if isinstance(source, str | bytes | bytearray | memoryview):
        try:
            return [], _messages.decode(source)
        except msgspec.ValidationError:
            return [], _from_wire(_any.decode(source))
    if isinstance(source, Sequence):
        if {Message}.issuperset(map(type, source)):
            return [], list(source)
        return [], _from_wire(source)
    msg = ("a conversion takes a Session, a sequence of derived messages, or their wire JSON "
           f"as `dsh-session derive` prints it; got {type(source).__name__}")
    raise TypeError(msg)


def block_kind(block: Block) -> str:
    """A block's kind: its tag, or an untyped block's ``type`` (``"?"`` without one)."""
    if isinstance(block, msgspec.Struct):
        return block.__struct_config__.tag  # type: ignore[return-value]
    kind = block.get("type")
    return kind if isinstance(kind, str) else "?"


def signature_of(block: Block) -> tuple[str, str | None, str | None] | None:
    """A reasoning block's ``(text, signature, redacted data)``, when it carries a
    provider signature or redacted reasoning (typed, or an untyped block's
    ``"signature"`` and ``"redactedData"``); ``None`` for any other block."""
    if isinstance(block, ReasoningBlock):
        signature = block.signature if isinstance(block.signature, str) else None
        redacted = block.redacted_data if isinstance(block.redacted_data, str) else None
        if signature is None and redacted is None:
            return None
        return block.text, signature, redacted
    if isinstance(block, msgspec.Struct) or block.get("type") != "reasoning":
        return None
    text, sig, data = block.get("text", ""), block.get("signature"), block.get("redactedData")
    if not isinstance(text, str):
        return None
    sig = sig if isinstance(sig, str) else None
    data = data if isinstance(data, str) else None
    return (text, sig, data) if sig is not None or data is not None else None


def placeholder(block: Block) -> str:
    """The text that stands for a block the target cannot express: its wire JSON in a
    ``<block type="...">`` tag, so the model still sees it and nothing is lost."""
    from .._codec import encode_line
    from ..jscompat import json_stringify

    kind = block_kind(block)
    value = block if isinstance(block, msgspec.Struct) else thaw(block)
    return f"<block type={json_stringify(kind)}>{encode_line(value).decode()}</block>"
