"""Folding the session mode out of a log: the last ``mode/set`` wins.

The fold is recomputed from the log on every read, as the reference does: the log is the
only state, so resume and fork restore the mode for free. It scans backwards from the end,
so a read costs the distance to the last ``mode/set``, not the length of the log.
"""

from __future__ import annotations

__all__ = ["fold_mode", "mode_at_last_header", "mode_set_name"]

from collections.abc import Mapping, Sequence

from dsh_session_core import Event, OpaqueEvent

from ._config import DEFAULT_MODE
from .events import ModeSet

_HEADER_TYPES = frozenset({"request/header", "request/header-delta"})


def mode_set_name(event: Event) -> str | None:
    """The mode a ``mode/set`` event names, or ``None`` for any other event.

    A ``mode/set`` is typed (:class:`ModeSet`) when the ``mode`` plugin is registered;
    otherwise, or when a loaded log holds one with extra keys, it is an
    :class:`~dsh_session_core.OpaqueEvent` and its ``mode`` is read from the raw payload.
    One whose ``mode`` is not a string names nothing and is skipped (the reference would
    fold to that value and then treat it as an undefined mode, i.e. as the default).
    """
    if type(event) is ModeSet:
        return event.data.mode
    if type(event) is OpaqueEvent and event.type == "mode/set":
        data = event.data
        mode = data.get("mode") if isinstance(data, Mapping) else None
        return mode if isinstance(mode, str) else None
    return None


def fold_mode(events: Sequence[Event], end: int | None = None) -> str:
    """The mode in force after the first ``end`` events (``foldMode``).

    :param events: the log, e.g. ``session.events``, or any prefix of it.
    :param end: fold ``events[0:end]`` only; the whole log when ``None``. As in the
        reference, ``end`` counts events from the start: ``0`` or a negative ``end``
        folds nothing, and one past the end folds everything.
    :returns: the ``mode`` of the last ``mode/set`` before ``end``, verbatim (an unknown
        name such as ``"retired"`` included), else ``"default"``.
    """
    stop = len(events) if end is None else max(0, min(end, len(events)))
    for i in range(stop - 1, -1, -1):
        mode = mode_set_name(events[i])
        if mode is not None:
            return mode
    return DEFAULT_MODE


def mode_at_last_header(events: Sequence[Event]) -> str | None:
    """The mode the last logged request header was built under: the fold up to and
    including the last ``request/header`` or ``request/header-delta``.

    :returns: that mode, or ``None`` when no header was ever logged.
    """
    for i in range(len(events) - 1, -1, -1):
        if events[i].type in _HEADER_TYPES:
            return fold_mode(events, i + 1)
    return None
