"""What every ``to_*`` conversion starts from: the source as a system prompt and messages.

The source normalized to a system prompt and a list of derived
:class:`~dsh_session_core.vocabulary.Message` values, the reading of untyped (opaque)
blocks, the placeholder text of a block a target cannot express, and
:class:`UnsupportedContentError`.

A source is a :class:`~dsh_session_core.Session` (its request header's ``system`` and
``messagePrefix``, then ``derive_messages()``: the request the loop builds), a sequence of
derived messages, or their wire JSON as ``dsh-session derive`` prints it (parsed, or as
``str``/``bytes``). Nothing here imports a provider SDK.

Every conversion sends each tool call with its result: a call no result answers (a step
ended without one, a log cut by a crash, a turn in flight) gets a synthetic error result
(:data:`~dsh_session_core._model.unanswered.UNANSWERED_TOOL_TEXT`), placed right after the
assistant message that made the call and the results that follow it, before the next
user or assistant message: where Chat Completions wants its ``tool`` messages, and the
head of the next user turn, where Anthropic wants its ``tool_result`` blocks. Both
providers answer HTTP 400 to a call without its result; the derived messages themselves
are left as the reference derives them (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec

from .._base.json_values import JsonObject, thaw
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
    from .._model.session import Session

__all__ = [
    "Block",
    "Source",
    "UnsupportedContentError",
    "all_text",
    "answer_unanswered",
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


def _call_ids(content: Sequence[Any]) -> list[str]:
    """The ids of an assistant message's tool-call blocks (typed, or untyped ones)."""
    ids: list[str] = []
    for b in content:
        cls = b.__class__
        if cls is ToolCallBlock:
            ids.append(b.id)
        elif (cls is not TextBlock and cls is not ReasoningBlock and isinstance(b, Mapping)
              and b.get("type") == "tool-call" and isinstance(b.get("id"), str)):
            ids.append(b["id"])
    return ids


def _result_ids(content: Sequence[Any]) -> tuple[list[str], bool]:
    """The tool-call ids a user message's results answer, and whether it holds results
    only."""
    ids: list[str] = []
    only = bool(content)
    for b in content:
        cls = b.__class__
        if cls is ToolResultBlock:
            ids.append(b.tool_call_id)
            continue
        if isinstance(b, Mapping) and b.get("type") == "tool-result":
            call_id = b.get("toolCallId")
            if isinstance(call_id, str):
                ids.append(call_id)
                continue
        only = False
    return ids, only


def _answers(call_ids: Iterable[str]) -> Message:
    from .._model.unanswered import UNANSWERED_TOOL_TEXT

    text = (TextBlock(text=UNANSWERED_TOOL_TEXT),)
    return Message(role="user", content=tuple(
        ToolResultBlock(tool_call_id=c, content=text, is_error=True) for c in call_ids))


def answer_unanswered(messages: list[Message]) -> list[Message]:
    """``messages`` with a synthetic error result for every tool call no result answers
    before the next assistant message (the list itself when every call is answered).

    The results go in one user message right after the assistant message that made the
    calls and the messages of results only that follow it (see the module's doc).
    """
    inserts: list[tuple[int, list[str]]] = []  # (insert before index, unanswered ids)
    pending: dict[str, None] = {}  # the current assistant message's calls, unanswered
    at = 0  # where the current message's answers go
    in_run = False  # still in the results that follow the assistant message
    for index, message in enumerate(messages):
        role = message.role
        if role == "assistant":
            if pending:
                inserts.append((at, list(pending)))
            pending = dict.fromkeys(_call_ids(message.content))
            at, in_run = index + 1, True
            continue
        if not pending:
            continue
        if role != "user":
            in_run = False
            continue
        ids, only = _result_ids(message.content)
        for call_id in ids:
            pending.pop(call_id, None)
        if in_run and only:
            at = index + 1
        else:
            in_run = False
    if pending:
        inserts.append((at, list(pending)))
    if not inserts:
        return messages
    out: list[Message] = []
    start = 0
    for position, ids in inserts:
        out.extend(messages[start:position])
        out.append(_answers(ids))
        start = position
    out.extend(messages[start:])
    return out


def normalize(source: Any) -> tuple[list[str], list[Message]]:
    """The system prompt texts and the messages of a source (see the module's doc), every
    tool call answered (:func:`answer_unanswered`).

    :raises TypeError: the source is none of the accepted kinds.
    """
    systems, messages = _normalize(source)
    return systems, answer_unanswered(messages)


def _normalize(source: Any) -> tuple[list[str], list[Message]]:
    from .._model.session import Session

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
    from .._schema.codec import encode_line
    from ..jscompat import json_stringify

    kind = block_kind(block)
    value = block if isinstance(block, msgspec.Struct) else thaw(block)
    return f"<block type={json_stringify(kind)}>{encode_line(value).decode()}</block>"
