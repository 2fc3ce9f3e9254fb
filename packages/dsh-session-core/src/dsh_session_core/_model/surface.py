"""The surface: a linked list over message events, spliced by ``replace`` ops.

Derived history is a projection of the surface, not of the log: a replace shadows a range
of nodes behind one new node (compaction), while the shadowed events stay in the log.
The surface folds the log incrementally, in log order; a replace is checked against the
surface as it stands just before it.

Live appends are checked before they are logged (a bad op is refused and nothing
changes). A *seeded* log may still hold a bad op, as the reference accepts it: then the
fold stops there and every later read raises the same :class:`SurfaceError`, without
corrupting what was folded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from msgspec import UNSET, Struct

from ..errors import SurfaceError
from ..events import Event, ReplaceOp
from ..jscompat import UNDEFINED, js_string

__all__ = ["Surface", "SurfaceNode"]


class SurfaceNode(Struct, frozen=True, gc=False):
    """One node: an event's seq and its neighbours' seqs in surface order."""

    seq: int
    prev: int | None
    next: int | None


def _replace_bounds(op: object) -> tuple[object, object]:
    if type(op) is ReplaceOp:
        return op.start, op.end
    get = getattr(op, "get", None)  # an opaque op is a read-only JSON object
    if get is not None:
        return get("start", UNDEFINED), get("end", UNDEFINED)
    return UNDEFINED, UNDEFINED  # the reference reads fields off any non-"append" value


@final
class Surface:
    """The surface of one session's log. Built by the session; read through it."""

    __slots__ = ("_candidates", "_cursor", "_error", "_events", "_generation", "_live",
                 "_order")

    def __init__(self, events: Sequence[Event], candidates: list[int]) -> None:
        """:param events: the session's live log.
        :param candidates: the indices, ascending, of every event that may be a surface
            node; the session keeps it up to date as it appends, so folding costs time
            proportional to the message events, not to the log."""
        self._events = events
        self._candidates = candidates
        self._cursor = 0
        self._order: list[int] = []
        self._live: set[int] = set()
        self._generation = 0
        self._error: SurfaceError | None = None

    # --- reading ------------------------------------------------------------------------

    def order(self) -> list[int]:
        """The node seqs, head to tail, after folding new events. Internal: not a copy."""
        if self._cursor != len(self._candidates) or self._error is not None:
            self._fold()
        return self._order

    @property
    def seqs(self) -> tuple[int, ...]:
        """The node seqs, head to tail."""
        return tuple(self.order())

    @property
    def nodes(self) -> tuple[SurfaceNode, ...]:
        """The nodes with their links, head to tail."""
        order = self.order()
        last = len(order) - 1
        return tuple(
            SurfaceNode(
                seq, order[i - 1] if i > 0 else None, order[i + 1] if i < last else None
            )
            for i, seq in enumerate(order)
        )

    @property
    def replace_generation(self) -> int:
        """Counts replaces (and invalidations); it only ever goes up."""
        self.order()
        return self._generation

    def invalidate(self) -> None:
        """Forget the fold; the next read refolds the whole log (recounting replaces)."""
        self._order = []
        self._live = set()
        self._cursor = 0
        self._error = None
        self._generation += 1

    # --- folding ------------------------------------------------------------------------

    def check(self, op: object) -> str | None:
        """Why ``op`` cannot be applied to the surface as it stands, or ``None``."""
        if op == "append":
            return None
        self.order()  # fold what was appended since the last read (may raise)
        try:
            self._positions(op)
        except SurfaceError as exc:
            return str(exc)
        return None

    def _positions(self, op: object) -> tuple[int, int]:
        start, end = _replace_bounds(op)
        live = self._live
        if start not in live:
            msg = f"surface replace: start seq {js_string(start)} not found in surface"
            raise SurfaceError(msg, seq=-1)
        if end not in live:
            msg = f"surface replace: end seq {js_string(end)} not found in surface"
            raise SurfaceError(msg, seq=-1)
        i = self._order.index(start)
        j = self._order.index(end)
        if i > j:
            msg = (
                f"surface replace: start seq {start} (index {i}) is after end seq {end} "
                f"(index {j})"
            )
            raise SurfaceError(msg, seq=-1)
        return i, j

    def _fold(self) -> None:
        if self._error is not None:
            raise self._error
        events = self._events
        candidates = self._candidates
        order = self._order
        live = self._live
        for k in range(self._cursor, len(candidates)):
            ev = events[candidates[k]]
            if not ev.surface:
                continue
            op = ev.surface_op  # type: ignore[attr-defined]
            if op is UNSET:
                continue
            seq = ev.seq
            if op == "append":
                order.append(seq)
                live.add(seq)
                continue
            try:
                a, b = self._positions(op)
            except SurfaceError as exc:
                # Stop before this event; every later read fails the same way.
                self._cursor = k
                self._error = SurfaceError(str(exc), seq=seq)
                raise self._error from None
            for s in order[a : b + 1]:
                live.discard(s)
            order[a : b + 1] = [seq]
            live.add(seq)
            self._generation += 1
        self._cursor = len(candidates)
