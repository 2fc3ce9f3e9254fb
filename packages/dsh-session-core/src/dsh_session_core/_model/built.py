"""The builders' fast path: payloads made directly from values the builder checked.

A builder call would otherwise make the wire dict a harness writes by hand and hand it
to ``Session.append``, which decodes it back into the payload Struct (issue 39: the
builders ran at 0.24x the rate of plain appends). When every value of a call is one the
builder can vouch for (its own turn and step numbers and seqs, a ``str``, a vocabulary
Struct whose fields pass the check :func:`~.builders.as_wire` makes before passing it
on), it makes the payload ``append``'s decode would make of that dict and logs it with
``Session._append_built``: the same event, the same line, the same guard and listener.
Any other value takes the dict path, so what is refused, and how, is unchanged.

A fast payload is made only for an event type the session's registry maps to core's
class (whose payload is the one made here), and only when the session's ``append`` is
:class:`~.session.Session`'s own (a subclass overriding it sees every event).
"""

from __future__ import annotations

__all__ = [
    "COMPLETED_REASON",
    "MESSAGE_TRIGGER",
    "USER_SOURCE",
    "built_entries",
    "content_blocks",
    "message_source",
    "usage_of",
]

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from msgspec import UNSET, UnsetType

from ..events import (
    AssistantChunk,
    AssistantMessage,
    ContextMessage,
    Event,
    SteeringMessage,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from ..vocabulary import (
    CompletedReason,
    ContentBlock,
    MessageSource,
    MessageTrigger,
    TextBlock,
    TokenUsage,
    UserSource,
)
from .builders import BLOCKS, SOURCES, usage_ok

if TYPE_CHECKING:
    from .._schema.registry import RegisteredEvent
    from .session import Session

#: The constant parts of the default payloads (frozen, so shared by every event).
USER_SOURCE: Final = UserSource()
MESSAGE_TRIGGER: Final = MessageTrigger(source=USER_SOURCE)
COMPLETED_REASON: Final = CompletedReason()

#: The types the builders may log fast, with core's class of each.
_CORE: Final[Mapping[str, type[Event]]] = {
    "turn/start": TurnStart, "turn/end": TurnEnd, "step/start": StepStart,
    "step/end": StepEnd, "assistant/chunk": AssistantChunk,
    "assistant/message": AssistantMessage, "tool/call": ToolCall, "tool/result": ToolResult,
    "user/message": UserMessage, "context/message": ContextMessage,
    "steering/message": SteeringMessage,
}
#: The untyped fields a fast payload leaves unset (tool/result's ``meta``): it is never
#: made when one is given, so append's check of them has nothing to check.
_UNSET_UNTYPED: Final = frozenset({"meta"})


def built_entries(session: Session) -> Mapping[str, RegisteredEvent]:
    """The registry entries of the types a builder of ``session`` may log fast (see the
    module docstring), by type; made once per session."""
    table = session._built
    if table is None:
        table = {}
        if session._own_append():
            for event_type, cls in _CORE.items():
                entry = session._lookup.get(event_type)
                if (entry is not None and entry.event is cls
                        and _UNSET_UNTYPED.issuperset(entry.untyped_fields)):
                    table[event_type] = entry
        session._built = table
    return table


def content_blocks(content: object) -> tuple[ContentBlock, ...] | None:
    """Content as its payload's tuple of blocks, when it is a ``str`` or a list (or
    tuple) of blocks each a ``str`` or a Struct :func:`~.builders.as_wire` passes on as
    it is; else ``None``: the builder appends the wire dict, for ``append`` to judge."""
    cls = content.__class__
    if cls is str:
        return (TextBlock(text=content),)  # type: ignore[arg-type]
    if cls is not list and cls is not tuple:
        return None
    blocks: list[Any] = []
    add = blocks.append
    for block in content:  # type: ignore[attr-defined]
        kind = block.__class__
        if kind is str:
            add(TextBlock(text=block))
            continue
        check = BLOCKS.get(kind)
        if check is None or not check(block):
            return None
        add(block)
    return tuple(blocks)


def message_source(source: object) -> MessageSource | None:
    """A message's source as its payload holds it (the user when ``None``), when it is
    one :func:`~.builders.as_wire` passes on as it is; else ``None``."""
    if source is None:
        return USER_SOURCE
    check = SOURCES.get(source.__class__)
    return source if check is not None and check(source) else None  # type: ignore[return-value]


def usage_of(usage: object) -> TokenUsage | UnsetType | None:
    """``usage=`` as the payload holds it: ``UNSET`` when not given, the TokenUsage when
    its fields pass their check; else ``None``: the dict path."""
    if usage is None:
        return UNSET
    if usage.__class__ is TokenUsage and usage_ok(usage):
        return usage
    return None
