"""What the Redis backend's load refuses: a stream damaged by hand.

(A server that cannot be reached is the backend's ``_reaching`` and
:func:`~.nodes.unavailable`'s: a write raises a :class:`ConnectionError`, an
:class:`OSError`, which the store names as a
:class:`~dsh_session_core.errors.StoreWriteError`.)

- **A stream damaged by hand** (an entry that is no log line, one added out of order):
  a load refuses it with a :class:`~dsh_session_core.errors.LogFormatError` naming the
  session, the seq and the stream entry, as the SQL backends name a damaged row,
  rather than handing on events that are not contiguous from seq 0.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from ...._schema.decode import decode_body
from ...._schema.registry import EventRegistry
from ...._schema.seq_text import event_seq, got_seq
from ....errors import LogFormatError
from ....events import Event

__all__ = ["checked_events"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_SEQ = operator.attrgetter("seq")


def checked_events(registry: EventRegistry, jsonl: bytes, session_id: str, where: str,
                   entry_at: Callable[[int], str]) -> list[Event]:
    """The events of a session's stream (its lines, ``jsonl``), each line an event of
    the seq of its place.

    :param where: the store, named by the error.
    :param entry_at: the id of the stream entry at an index, named by the error.
    :raises LogFormatError: an entry is no event, or not of the seq of its place.
    """
    unparsable: LogFormatError | None = None
    try:
        events = decode_body(registry, jsonl)
    except LogFormatError as exc:  # the lines before it parse: a gap there comes first
        unparsable = exc
        events = decode_body(registry, b"".join(
            line + b"\n" for line in jsonl.split(b"\n")[:exc.line or 0]))
    seqs = list(map(_SEQ, events))
    if seqs == list(range(len(seqs))) and set(map(type, seqs)) <= {int}:
        if unparsable is None:
            return events  # checked at C speed: a bool or a float seq equals an int
        at = len(events)
        problem = f"unparsable committed event at seq {at} ({unparsable})"
    else:
        at = next(i for i, ev in enumerate(events)
                  if (seq := event_seq(ev)) != i or type(seq) is not int)
        problem = (f"seq gap in committed region (expected {at}, "
                   f"got {got_seq(event_seq(events[at]))})")
    msg = (f'corrupt session log: {problem}: session "{session_id}", stream entry '
           f"{entry_at(at)}; the stream was changed by another program: put the entry back "
           f"as it was written, or remove the session")
    raise LogFormatError(msg, path=where) from None
