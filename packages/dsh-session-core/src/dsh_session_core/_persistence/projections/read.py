"""Reading a projection: :class:`ProjectionView`, one projection of one stored session.

Where the backend keeps rows (:class:`~..capabilities.Projecting`) and their mark is the
projection's version and matches the log (the event it says it folds last is the one
stored at that seq), the rows are read by key or key range, and the events stored after
the mark, if any (a JSONL writer killed between its log and its sidecar, a writer of a
release without projections), are folded on top in memory. Anything else (no rows, a
mark of another version, another log's rows) is never trusted: the log is folded. So a
read never serves a stale row, and costs what it returns where the rows are current.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import Any, Final, Generic, TypeVar

import msgspec

from ..._schema.decode import decode_lines
from ..._schema.projections import Projection
from ..._schema.registry import EventRegistry
from ..base import keep_types
from ..capabilities import Capabilities, lines_of_types_of, read_lines_of
from ..rows import KEY_MAX, Mark, RowChanges, RowQuery, RowTable, decode_mark, mark_matches
from .fold import fold_changes, mark_after

__all__ = ["ProjectionView", "open_view", "summaries"]

R = TypeVar("R")


class _Envelope(msgspec.Struct, gc=False):
    seq: Any = None
    type: Any = None
    time: Any = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)


def _envelope(line: bytes) -> dict[str, Any] | None:
    try:
        e = _ENVELOPE.decode(line)
    except msgspec.DecodeError:
        return None
    return {"seq": e.seq, "type": e.type, "time": e.time}


class ProjectionView(Generic[R]):
    """One projection's rows of one stored session, as of when it was opened
    (:meth:`DurableStore.projection <dsh_session_core.DurableStore.projection>`).

    :ivar projection: the projection.
    :ivar session_id: the session.
    :ivar covers: how many of the session's events the rows fold.
    :ivar folded: how many events this view folded from the log itself (``0`` where
        the stored rows were current): what its opening cost beyond the rows.
    """

    __slots__ = ("_fetch", "_moved", "_overlay", "covers", "folded", "projection",
                 "session_id")

    def __init__(self, projection: Projection, session_id: str, covers: int, folded: int,
                 fetch: Any, overlay: RowChanges | None, moved: Any = None) -> None:
        self.projection = projection
        self.session_id = session_id
        self.covers = covers
        self.folded = folded
        #: ``fetch(query)`` -> stored rows, ``(key, bytes)``; ``None``: none are stored.
        self._fetch = fetch
        self._overlay = overlay
        #: ``moved()`` -> a view opened anew when the stored rows moved on since this one
        #: was opened with a tail folded on top (their changes and its would mix), else
        #: ``None``.
        self._moved = moved

    def get(self, key: str) -> R | None:
        """The row under ``key``, or ``None``."""
        found = self._select(RowQuery(keys=(key,)))
        return found[0][1] if found else None

    def get_many(self, keys: Iterable[str]) -> dict[str, R]:
        """The rows under ``keys`` that exist, by key."""
        return dict(self._select(RowQuery(keys=tuple(keys))))

    def rows(self, *, prefix: str | None = None, start: str | None = None,
             stop: str | None = None, newest_first: bool = False,
             limit: int | None = None) -> builtins.list[tuple[str, R]]:
        """The rows whose keys start with ``prefix`` and lie in ``[start, stop)``, in key
        order (``newest_first``: descending), at most ``limit``: ``(key, row)`` pairs."""
        if prefix is not None:
            start = prefix if start is None or start < prefix else start
            bound = prefix + KEY_MAX
            stop = bound if stop is None or stop > bound else stop
        if limit is not None and limit <= 0:
            return []
        return self._select(RowQuery(None, start, stop, newest_first, limit))

    def summary(self) -> Any:
        """The session's summary row, or ``None``."""
        overlay = self._overlay
        if overlay is not None and (overlay.summary_set or overlay.rebuild):
            data = overlay.summary
        else:
            data = self._fetch("summary") if self._fetch is not None else None
        return None if data is None else self.projection.decode_summary(data)

    def _select(self, query: RowQuery) -> builtins.list[tuple[str, Any]]:
        decode = self.projection.decode_row
        overlay = self._overlay
        if overlay is None or (not overlay.rows and not (overlay.clear or overlay.rebuild)):
            fetched = self._fetch(query)
            rows = self.projection.decode_rows([v for _, v in fetched])
            return [(k, row) for (k, _), row in zip(fetched, rows, strict=True)]
        # Stored rows, with the tail's changes on top: read enough stored rows that those
        # the tail replaced or removed cannot leave the answer short.
        merged: dict[str, bytes] = {}
        if not (overlay.clear or overlay.rebuild) and self._fetch is not None:
            wider = query
            if query.limit is not None:
                wider = RowQuery(query.keys, query.start, query.stop, query.newest_first,
                                 query.limit + len(overlay.rows))
            merged.update(self._fetch(wider))
            anew: ProjectionView[Any] | None = (self._moved() if self._moved is not None
                                                else None)
            if anew is not None:  # a writer caught the rows up meanwhile: read them
                return anew._select(query)
        for key, row in overlay.rows.items():
            if not query.admits(key):
                continue
            if row is None:
                merged.pop(key, None)
            else:
                merged[key] = row
        table = RowTable.of(merged)
        return [(k, decode(v)) for k, v in table.select(query)]


def _fold_all(caps: Capabilities, registry: EventRegistry, projection: Projection,
              session_id: str) -> ProjectionView[Any] | None:
    """The view folded from the whole log (``None``: the session is not stored)."""
    lines = lines_of_types_of(caps, session_id, projection.types)
    if lines is None:
        return None
    last = caps.backend.tail_lines(session_id, 1)
    envelope = _envelope(last.lines[-1]) if last is not None and last.lines else None
    seq = envelope.get("seq") if envelope is not None else None
    covers = seq + 1 if isinstance(seq, int) else 0
    events = decode_lines(registry, lines)
    # The mark is of the last event folded, as far as this view goes: it is never stored.
    changes = fold_changes(projection, events, mark_after(projection, None), rebuild=True)
    table = RowTable()
    table.apply(changes)
    summary = table.summary

    def fetch(query: RowQuery | str) -> Any:
        return summary if query == "summary" else table.select(query)  # type: ignore[arg-type]

    return ProjectionView(projection, session_id, covers, covers, fetch, None)


def open_view(caps: Capabilities, registry: EventRegistry, projection: Projection,
              session_id: str) -> ProjectionView[Any] | None:
    """``projection`` of ``session_id`` as stored now (see the module's docstring);
    ``None`` when the session is not stored."""
    rows = caps.projecting
    mark = None
    if rows is not None:
        stored = rows.projection_marks(session_id).get(projection.name)
        mark = decode_mark(stored) if stored is not None else None
    if rows is None or mark is None or mark.version != projection.version:
        return _fold_all(caps, registry, projection, session_id)
    lines = read_lines_of(caps, session_id, mark.covers - 2, None)
    if lines is None:
        return None
    if mark.covers:
        if not lines or not mark_matches(mark, _envelope(lines[0])):
            return _fold_all(caps, registry, projection, session_id)
        lines = lines[1:]
    overlay = None
    folded = 0
    if lines:
        tail = keep_types(lines, projection.types)
        events = decode_lines(registry, tail) if tail else []
        folded = len(lines)
        overlay = fold_changes(projection, events, mark)
    name = projection.name

    def fetch(query: RowQuery | str) -> Any:
        if query == "summary":
            found = rows.projection_summaries(name, (session_id,))
            return found[0][2] if found else None
        return rows.projection_rows(session_id, name, query)  # type: ignore[arg-type]

    def moved() -> ProjectionView[Any] | None:
        now = rows.projection_marks(session_id).get(name)
        if now == stored:
            return None
        return open_view(caps, registry, projection, session_id)

    return ProjectionView(projection, session_id, mark.covers + len(lines), folded, fetch,
                          overlay, moved if overlay is not None else None)


def summaries(caps: Capabilities, registry: EventRegistry, projection: Projection,
              session_ids: Sequence[str]) -> dict[str, Any]:
    """The summary rows of ``session_ids`` (a session without one is left out)."""
    found: dict[str, Any] = {}
    rows = caps.projecting
    trusted: dict[str, tuple[Mark, bytes]] = {}
    if rows is not None:
        for sid, stored, data in rows.projection_summaries(projection.name, session_ids):
            mark = decode_mark(stored)
            if mark is not None and mark.version == projection.version:
                trusted[sid] = (mark, data)
    for sid in session_ids:
        view = open_view(caps, registry, projection, sid) if sid not in trusted else None
        if sid in trusted:
            mark, data = trusted[sid]
            lines = read_lines_of(caps, sid, mark.covers - 2, None)
            if lines is not None and (not mark.covers or (
                    lines and mark_matches(mark, _envelope(lines[0])))) and len(lines) <= 1:
                found[sid] = projection.decode_summary(data)
                continue
            view = open_view(caps, registry, projection, sid)
        if view is not None:
            summary = view.summary()
            if summary is not None:
                found[sid] = summary
    return found
