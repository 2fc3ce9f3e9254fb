"""Making a session's derived conversation a given one with a surface ``replace``.

It is what an integration does when its framework rewrites the history (a pop, a clear,
a branch), while the events it shadows stay in the log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._schema.codec import to_wire
from ..vocabulary import Message

if TYPE_CHECKING:
    from .session import Session

__all__ = ["resurface"]

_USER: Any = {"kind": "user"}


def resurface(session: Session, target: Sequence[Message], *, turn: int) -> None:
    """Make ``session.derive_messages()`` equal ``target``.

    The surface nodes from the first message that differs to the last are replaced by
    one event holding ``target``'s message there (an empty ``assistant/message``, which
    derives none, when ``target`` has none), and the rest of ``target`` is appended after
    it; with no node to replace, everything is appended. The shadowed events stay in the
    log, and ``sourceEventSeqs`` names them. Each message is an ``assistant/message``
    (in step 0 of ``turn``, which must be open) or a ``user/message`` from the user.
    Nothing is appended when the conversation is ``target`` already.
    """
    current = session.derive_messages()
    if list(current) == list(target):
        return
    keep = 0
    while keep < min(len(current), len(target)) and current[keep] == target[keep]:
        keep += 1
    events = session.events
    seqs = list(session.surface.order())
    seen, start = 0, len(seqs)
    for position, seq in enumerate(seqs):
        if session.derive_event_message(events[seq]) is not None:
            if seen == keep:
                start = position
                break
            seen += 1
    shadowed = seqs[start:]
    rest = list(target[keep:])
    first = rest[0] if rest else Message(role="assistant", content=())
    if shadowed:
        op: Any = {"op": "replace", "start": shadowed[0], "end": shadowed[-1]}
        append_message(session, first, turn, op, shadowed)
    else:
        append_message(session, first, turn, "append", None)
    for message in rest[1:]:
        append_message(session, message, turn, "append", None)


def append_message(session: Session, message: Message, turn: int, op: Any,
                   sources: list[int] | None) -> None:
    """Append ``message`` as its event (``assistant/message`` in step 0 of ``turn``, or
    ``user/message`` from the user), with the surface op and source seqs given."""
    content = [to_wire(b) for b in message.content]
    if message.role == "assistant":
        session.append("assistant/message", {"turn": turn, "step": 0, "content": content},
                       surface_op=op, source_event_seqs=sources)
    else:
        session.append("user/message", {"content": content, "source": _USER},
                       surface_op=op, source_event_seqs=sources)
