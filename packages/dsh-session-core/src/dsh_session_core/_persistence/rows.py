"""Projection rows as a backend keeps them: marks, a batch's changes, a query, a table.

What every backend with the :class:`~.capabilities.Projecting` capability shares, and
the store's projection room (``projections/``) builds on. A backend stores rows as
opaque bytes (a projection's encoded rows, sealed on an encrypted store) under
``(session, projection, key)``, one summary row per ``(session, projection)``, and a
:class:`Mark` per ``(session, projection)`` saying how much of the log the rows fold.

A backend never interprets a row or a mark: the store checks a mark against the log
before it trusts the rows (:func:`mark_matches`), so rows a backend kept for a log that
was since replaced, cut or written by a release that knows nothing of projections are
never read as current.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

__all__ = [
    "KEY_MAX",
    "Mark",
    "RowChanges",
    "RowQuery",
    "RowTable",
    "decode_mark",
    "encode_mark",
    "mark_matches",
]

#: A character above every other: ``prefix + KEY_MAX`` bounds a prefix's keys.
KEY_MAX: Final = "\U0010ffff"


class Mark(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """How far one projection's rows of one session go.

    :ivar version: the projection's version the rows were folded by.
    :ivar covers: how many events they fold (seqs ``0 .. covers - 1``).
    :ivar type: the ``type`` of the last event folded (``""`` when ``covers == 0``).
    :ivar time: its ``time``: with ``type``, what tells the log the rows were folded
        from from another log of the same id (both are in the clear on an encrypted
        store, in every event's envelope).
    """

    version: int
    covers: int
    type: str = ""
    time: Any = None


_MARK_ENCODER: Final = msgspec.json.Encoder()
_MARK_DECODER: Final = msgspec.json.Decoder(Mark)


def encode_mark(mark: Mark) -> bytes:
    return _MARK_ENCODER.encode(mark)


def decode_mark(data: bytes) -> Mark | None:
    """A stored mark, or ``None`` when it cannot be read (never trusted, then)."""
    try:
        return _MARK_DECODER.decode(data)
    except (msgspec.DecodeError, TypeError, ValueError):
        return None


def mark_matches(mark: Mark, envelope: Mapping[str, Any] | None) -> bool:
    """Whether ``envelope`` (the stored event at seq ``mark.covers - 1``, as a mapping
    of at least ``seq``, ``type`` and ``time``; ``None`` when there is none) is the
    event the mark says its rows fold last."""
    if mark.covers == 0:
        return True
    if envelope is None:
        return False
    return (envelope.get("seq") == mark.covers - 1 and envelope.get("type") == mark.type
            and envelope.get("time") == mark.time)


@dataclasses.dataclass(slots=True)
class RowChanges:
    """One projection's changes to one session's rows in one write.

    :ivar name: the projection.
    :ivar mark: the mark once the changes are applied (encoded).
    :ivar rebuild: drop every row and the summary first (a fold from the log's start).
    :ivar clear: drop every row (not the summary) first.
    :ivar rows: then set each key's row (its encoded bytes), or remove it (``None``).
    :ivar summary: then set the summary row (its bytes) or remove it (``None``), when
        ``summary_set``.
    """

    name: str
    mark: bytes
    rebuild: bool = False
    clear: bool = False
    rows: dict[str, bytes | None] = dataclasses.field(default_factory=dict)
    summary_set: bool = False
    summary: bytes | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RowQuery:
    """Which rows of one projection of one session a read wants.

    :ivar keys: exactly these keys (the others below are ignored), in no order.
    :ivar start: the first key (inclusive), or from the first.
    :ivar stop: the key to stop before (exclusive), or to the last.
    :ivar newest_first: in descending key order.
    :ivar limit: at most this many rows.
    """

    keys: tuple[str, ...] | None = None
    start: str | None = None
    stop: str | None = None
    newest_first: bool = False
    limit: int | None = None

    def admits(self, key: str) -> bool:
        """Whether ``key`` is one this query asks for (its limit aside)."""
        if self.keys is not None:
            return key in self.keys
        return ((self.start is None or key >= self.start)
                and (self.stop is None or key < self.stop))


class RowTable:
    """One projection's rows of one session in memory: the memory backend's storage,
    a fold of a log where no rows are kept, and the rows a reader folds from a log's
    tail on top of stored ones. Keys are kept sorted, so a range costs what it returns.
    """

    __slots__ = ("_keys", "rows", "summary")

    def __init__(self) -> None:
        self.rows: dict[str, bytes] = {}
        self._keys: list[str] | None = []
        self.summary: bytes | None = None

    @classmethod
    def of(cls, rows: dict[str, bytes]) -> RowTable:
        """A table holding ``rows`` (taken, not copied)."""
        table = cls()
        table.rows = rows
        table._keys = None
        return table

    def apply(self, changes: RowChanges) -> None:
        if changes.rebuild:
            self.summary = None
        if changes.rebuild or changes.clear:
            self.rows.clear()
            self._keys = []
        for key, row in changes.rows.items():
            if row is None:
                if self.rows.pop(key, None) is not None:
                    self._keys = None
            else:
                if key not in self.rows:
                    self._keys = None
                self.rows[key] = row
        if changes.summary_set:
            self.summary = changes.summary

    def sorted_keys(self) -> list[str]:
        if self._keys is None:
            self._keys = sorted(self.rows)
        return self._keys

    def select(self, query: RowQuery) -> list[tuple[str, bytes]]:
        """The rows ``query`` asks for, in its order."""
        if query.keys is not None:
            found = [(k, self.rows[k]) for k in sorted(set(query.keys)) if k in self.rows]
            if query.newest_first:
                found.reverse()
            return found if query.limit is None else found[:query.limit]
        keys = self.sorted_keys()
        lo = 0 if query.start is None else bisect.bisect_left(keys, query.start)
        hi = len(keys) if query.stop is None else bisect.bisect_left(keys, query.stop)
        span: Iterable[str] = keys[lo:hi]
        if query.newest_first:
            span = reversed(keys[lo:hi])
        out: list[tuple[str, bytes]] = []
        for key in span:
            if query.limit is not None and len(out) >= query.limit:
                break
            out.append((key, self.rows[key]))
        return out

