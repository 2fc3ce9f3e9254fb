"""Keeping projections current: the rows' changes each flush writes with its batch.

The write path (``store/write_path.py``) asks :class:`Keeper` for the changes of a batch
before it hands the batch to the backend, and tells it what the backend took. Per
session the keeper knows how far each projection's stored rows go (their mark, checked
once against the log the writer holds): rows that fold the log up to the batch get the
batch's changes; rows behind (a repair's closers, a release without projections wrote
since) get the missing events' changes too; a session without rows of a projection whose
events it holds (a store written before the projection existed, a new version) gets
them folded from the log's start. A projection whose events a session never held keeps
no rows there: its readers fold nothing.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence

from ..._schema.projections import Projection
from ...errors import PluginError
from ...events import Event
from ..capabilities import Projecting
from ..rows import Mark, RowChanges, decode_mark, encode_mark
from .fold import fold_changes, mark_after

__all__ = ["BROKEN", "Keeper"]

_log = logging.getLogger("dsh_session_core.projections")

#: What a session's table of covers holds for a projection whose fold failed there: its
#: rows are dropped and it is not tried again by this writer (readers fold, and say why).
BROKEN = -1


class Keeper:
    """The projections of one store's write path.

    :param projections: the registry's projections.
    :param backend: the backend's :class:`Projecting` capability.
    """

    __slots__ = ("_backend", "_projections")

    def __init__(self, projections: Sequence[Projection], backend: Projecting) -> None:
        self._projections = tuple(projections)
        self._backend = backend

    def trusted(self, session_id: str, events: Sequence[Event]) -> dict[str, int]:
        """How many events each projection's stored rows of the session fold, for the
        marks that match ``events`` (the log the writer holds, from its start): rows of
        another version, or of another log of this id, are not counted (rebuilt)."""
        covers: dict[str, int] = {}
        by_name = {p.name: p for p in self._projections}
        for name, stored in self._backend.projection_marks(session_id).items():
            p = by_name.get(name)
            mark = decode_mark(stored)
            if p is None or mark is None or mark.version != p.version:
                continue
            if mark.covers > len(events):
                continue
            if mark.covers:
                last = events[mark.covers - 1]
                if last.seq != mark.covers - 1 or last.type != mark.type or last.time != mark.time:
                    continue
            covers[name] = mark.covers
        return covers

    def changes(self, covers: dict[str, int], cursor: int,
                before: Callable[[], Sequence[Event]], batch: Sequence[Event]
                ) -> list[RowChanges]:
        """The changes of ``batch`` (the events from seq ``cursor`` on) for every
        projection that keeps rows in the session or reads one of its events; ``covers``
        as :meth:`trusted` gave it (updated by :meth:`written`); ``before()``: the log's
        events before ``cursor``, read only when a projection needs them."""
        out: list[RowChanges] = []
        last = batch[-1] if batch else None
        for p in self._projections:
            had = covers.get(p.name)
            if had == BROKEN:
                continue
            if had is None and not any(e.type in p.types for e in batch):
                continue
            mark = mark_after(p, last)
            try:
                if had == cursor:
                    out.append(fold_changes(p, batch, mark))
                elif had is not None and had < cursor:
                    earlier = itertools.islice(before(), had, cursor)
                    out.append(fold_changes(p, itertools.chain(earlier, batch), mark))
                else:
                    earlier = itertools.islice(before(), 0, cursor)
                    out.append(fold_changes(p, itertools.chain(earlier, batch), mark,
                                            rebuild=True))
            except PluginError as exc:
                _log.warning("%s", exc)
                covers[p.name] = BROKEN
                # Its rows dropped, a mark no version matches: readers fold the log.
                out.append(RowChanges(p.name, encode_mark(Mark(0, 0)), rebuild=True))
        return out

    def stale(self, covers: dict[str, int], events: Sequence[Event]) -> list[RowChanges]:
        """The changes that bring every projection's rows up to ``events`` (the whole
        log, its writer lock held) where they are behind it or missing while it holds
        events of the projection's types: what a store written before a projection
        existed (or by a release without projections) gains when a writer opens a
        session. ``covers`` as :meth:`trusted` gave it (updated by :meth:`written`)."""
        cursor = len(events)
        if not cursor or all(covers.get(p.name) in (cursor, BROKEN)
                             for p in self._projections):
            return []
        present: set[str] | None = None
        out: list[RowChanges] = []
        for p in self._projections:
            had = covers.get(p.name)
            if had in (cursor, BROKEN):
                continue
            if had is None:
                if present is None:
                    present = {e.type for e in events}
                if present.isdisjoint(p.types):
                    continue
            mark = mark_after(p, events[-1])
            try:
                if had is not None and had < cursor:
                    out.append(fold_changes(p, itertools.islice(events, had, cursor), mark))
                else:
                    out.append(fold_changes(p, events, mark, rebuild=True))
            except PluginError as exc:
                _log.warning("%s", exc)
                covers[p.name] = BROKEN
                out.append(RowChanges(p.name, encode_mark(Mark(0, 0)), rebuild=True))
        return out

    @staticmethod
    def written(covers: dict[str, int], changes: Sequence[RowChanges], cursor: int) -> None:
        """Note that the backend took ``changes`` with the batch (the log now holds
        ``cursor`` events)."""
        for change in changes:
            if covers.get(change.name) != BROKEN:
                covers[change.name] = cursor
