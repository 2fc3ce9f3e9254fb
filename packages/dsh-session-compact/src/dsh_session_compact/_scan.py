"""Backward scans of the log: the compaction lock (spec §2.5) and the open turn.

Both read event types as strings, so they work on logs where the ``compact/*`` events
are typed and on logs where they are opaque (a session whose registry lacks the compact
plugin still logs them).
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_session_core import Event

from ._blocks import field

__all__ = ["compaction_in_progress", "open_turn"]


def compaction_in_progress(events: Sequence[Event]) -> bool:
    """Whether the open turn holds the compaction lock.

    Scanning back from the tail, the lock is held when a ``compact/start`` comes before
    any ``compact/end`` or ``turn/end``. The scan stops at ``turn/end``, so the lock is
    turn-scoped: an orphan ``compact/start`` left by a crashed (and later closed) turn
    does not block compaction in a new turn.

    :param events: the log (``session.events``).
    """
    for i in range(len(events) - 1, -1, -1):
        kind = events[i].type
        if kind == "compact/start":
            return True
        if kind in ("compact/end", "turn/end"):
            return False
    return False


def open_turn(events: Sequence[Event]) -> int | None:
    """The number of the open turn, or ``None`` when no turn is open.

    Scanning back from the tail: a ``turn/start`` gives its turn; a ``turn/end``, or
    the start of the log, means none is open.

    :param events: the log (``session.events``).
    """
    for i in range(len(events) - 1, -1, -1):
        event = events[i]
        kind = event.type
        if kind == "turn/start":
            turn = field(event.data, "turn")
            return turn if isinstance(turn, int) and not isinstance(turn, bool) else None
        if kind == "turn/end":
            return None
    return None
