"""Reading a thread from its ``langgraph/checkpoints`` rows (:mod:`._projection`):
:class:`RowReader`, what ``get_tuple`` and ``list`` read when the saver holds no index
of the thread (a fresh saver, a thread only other savers wrote).

One reader serves one call, on a view of the rows as stored when it was opened: a
checkpoint and its writes by a key range, a namespace's newest with theirs by a
descending one, and each value by the ids of its ``sources`` (the checkpoint rows that
hold its blob, and its delta chain's), fetched together level by level and kept for
the call. A checkpoint stored before ``sources`` existed (``None``) cannot be followed: the
reader raises :class:`_Unfollowable` and the saver folds the log instead.
"""

from __future__ import annotations

__all__ = ["RowReader", "Stash", "_Unfollowable", "adopt", "stash"]

import builtins
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from dsh_session_core import PersistenceError
from dsh_session_core.projections import ProjectionView

from ._deltas import Tail
from ._index import StoredWrite, ThreadIndex
from ._projection import (
    CheckpointRow,
    NamespaceRow,
    Row,
    WriteRow,
    checkpoint_key,
    checkpoints_prefix,
    part,
)
from .events import LanggraphCheckpointData, TypedBlob

#: Above every character a key holds: ``prefix + _LAST`` bounds a prefix's keys.
_LAST = "\U0010ffff"
#: The rows a first page of ``newest`` reads for each checkpoint it wants (its row and a
#: write: measured best on bench/langgraph.py); a page short of them reads four times as
#: many next.
_PAGE = 2


class _Unfollowable(Exception):  # a signal to the saver, never raised out
    """A row the reader cannot follow (stored before ``sources`` existed): fold the log."""


class RowReader:
    """One call's reader of one thread's rows (see the module's docstring).

    :ivar tails: the tails a read with ``tails`` made (:meth:`Codec.channel_values`),
        by (namespace, channel), for the saver to keep.
    """

    def __init__(self, thread_id: str, view: ProjectionView[Row]) -> None:
        self.thread_id = thread_id
        self.view = view
        self.tails: dict[tuple[str, str], Tail] = {}
        self._rows: dict[tuple[str, str], LanggraphCheckpointData | None] = {}
        #: (namespace, checkpoint id), both escaped as in keys -> the writes read.
        self._writes: dict[tuple[str, str], builtins.list[StoredWrite]] = {}

    @property
    def fresh(self) -> bool:
        """``True``: the rows a read decodes are its own, handed out as they are."""
        return True

    # --- checkpoints and their writes -----------------------------------------------

    def _take(self, found: Iterable[tuple[str, Row]]) -> builtins.list[LanggraphCheckpointData]:
        """Keep what ``found`` holds: its checkpoints (returned, in its order) and the
        writes of each (a write row names its checkpoint in its key only, escaped)."""
        out = []
        for key, row in found:
            item = row.item
            if item.__class__ is CheckpointRow:
                assert isinstance(item, CheckpointRow)
                d = item.data
                self._rows[(d.ns, d.id)] = d
                out.append(d)
            elif item.__class__ is WriteRow:
                assert isinstance(item, WriteRow)
                _, ns, cid, _ = key.split("/", 3)
                w = item.write
                self._writes.setdefault((ns, cid), []).append(
                    (item.task_id, w.channel, w.value, item.task_path, w.idx))
        return out

    def checkpoint(self, ns: str, checkpoint_id: str) -> LanggraphCheckpointData | None:
        """Checkpoint ``checkpoint_id`` of ``ns`` (with its writes), or ``None``."""
        key = checkpoint_key(ns, checkpoint_id)
        self._take(self.view.rows(start=key, stop=f"{key}/{_LAST}"))
        return self._rows.setdefault((ns, checkpoint_id), None)

    def namespaces(self) -> builtins.list[str]:
        return [row.item.ns for _, row in self.view.rows(prefix="n/")
                if row.item.__class__ is NamespaceRow]

    def newest(self, ns: str, before: str | None, limit: int | None,
               admits: Callable[[LanggraphCheckpointData], bool]
               ) -> builtins.list[LanggraphCheckpointData]:
        """The checkpoints of ``ns`` older than ``before`` that ``admits`` takes, newest
        first, at most ``limit`` (with their writes, which come before each in the
        range): read a page of rows at a time."""
        prefix = checkpoints_prefix(ns)
        stop = prefix + part(before) if before is not None else None
        out: builtins.list[LanggraphCheckpointData] = []
        page = None if limit is None else _PAGE * limit
        while True:
            rows = self.view.rows(prefix=prefix, stop=stop, newest_first=True, limit=page)
            for d in self._take(rows):
                if admits(d):
                    out.append(d)
                    if limit is not None and len(out) >= limit:
                        return out
            if page is None or len(rows) < page:
                return out
            stop = rows[-1][0]
            page *= 4

    def select(self, only_ns: str | None, only_id: str | None, before: str | None,
               metadata: dict[str, Any] | None, limit: int | None
               ) -> builtins.list[tuple[LanggraphCheckpointData, builtins.list[StoredWrite]]]:
        """What ``list`` gives of this thread: its checkpoints (of ``only_ns``; only
        ``only_id``), older than ``before``, whose metadata holds ``metadata``'s items,
        newest first, at most ``limit``; each with its writes, its values' rows read.

        :raises _Unfollowable: a value's rows cannot be followed (fold the log).
        """
        def admits(d: LanggraphCheckpointData) -> bool:
            return not metadata or all(d.metadata.get(k) == v for k, v in metadata.items())

        chosen: builtins.list[LanggraphCheckpointData] = []
        for ns in [only_ns] if only_ns is not None else self.namespaces():
            if only_id is None:
                chosen.extend(self.newest(ns, before, limit, admits))
                continue
            d = self.checkpoint(ns, only_id)
            if d is not None and (before is None or d.id < before) and admits(d):
                chosen.append(d)
        chosen.sort(key=lambda d: d.id, reverse=True)
        if limit is not None:
            del chosen[limit:]
        self.prefetch(chosen)
        return [(d, self._writes.get((part(d.ns), part(d.id)), [])) for d in chosen]

    # --- values ---------------------------------------------------------------------

    def prefetch(self, chosen: Iterable[LanggraphCheckpointData]) -> None:
        """Read the rows holding ``chosen``'s values, a level of their chains at a time
        (one read a level): what :meth:`chain` then finds kept."""
        frontier: set[tuple[str, str, str]] = set()  # (ns, channel, checkpoint id)
        for d in chosen:
            for channel in d.channel_versions:
                nxt = self._next(d, channel, d.channel_versions[channel])
                if nxt is not None:
                    frontier.add((d.ns, channel, nxt))
        seen: set[tuple[str, str, str]] = set()
        while frontier:
            seen |= frontier
            missing = {(ns, cid) for ns, _, cid in frontier if (ns, cid) not in self._rows}
            if missing:
                keys = [checkpoint_key(ns, cid) for ns, cid in missing]
                self._take(self.view.get_many(keys).items())
                for key in missing:
                    self._rows.setdefault(key, None)
            following = set()
            for ns, channel, cid in frontier:
                holder = self._rows.get((ns, cid))
                blob = holder.blobs.get(channel) if holder is not None else None
                if holder is not None and blob is not None and blob.base is not None:
                    if holder.sources is None:
                        raise _Unfollowable
                    src = holder.sources.get(channel)
                    if src is not None and (ns, channel, src) not in seen:
                        following.add((ns, channel, src))
            frontier = following

    @staticmethod
    def _next(d: LanggraphCheckpointData, channel: str, version: object) -> str | None:
        """The checkpoint holding ``d``'s blob of ``channel`` (``d`` itself when it
        wrote it), or ``None`` when none does."""
        own = d.blobs.get(channel)
        if own is not None and own.version == version:
            return d.id
        if d.sources is None:
            raise _Unfollowable
        return d.sources.get(channel)

    def chain(self, d: LanggraphCheckpointData, channel: str) -> builtins.list[TypedBlob]:
        """The blobs that make ``d``'s value of ``channel``, as
        :meth:`ThreadIndex.chain <._index.ThreadIndex.chain>` gives them.

        :raises PersistenceError: a row the chain needs is missing (a damaged log).
        :raises _Unfollowable: a checkpoint of the chain was stored without ``sources``.
        """
        version: Any = d.channel_versions.get(channel)
        holder = self._hold(d, channel, self._next(d, channel, version), version)
        if holder is None:
            return []
        pieces = [holder.blobs[channel]]
        walked = {holder.id}
        while (base := pieces[-1].base) is not None:
            if holder.sources is None:
                raise _Unfollowable
            holder = self._hold(d, channel, holder.sources.get(channel), base)
            if holder is None or holder.id in walked:  # no base, or a loop
                self._damaged(d, channel, pieces[-1].version, base)
            walked.add(holder.id)
            pieces.append(holder.blobs[channel])
        return pieces

    def _hold(self, d: LanggraphCheckpointData, channel: str, holder_id: str | None,
              version: object) -> LanggraphCheckpointData | None:
        """The checkpoint ``holder_id`` of ``d``'s namespace, holding ``channel``'s blob
        at ``version``; ``None`` when ``holder_id`` is."""
        if holder_id is None:
            return None
        holder = self._rows.get((d.ns, holder_id))
        if holder is None:  # not read yet (prefetch reads them): its row alone
            row = self.view.get(checkpoint_key(d.ns, holder_id))
            holder = self._take([("", row)])[0] if row is not None else None
        blob = holder.blobs.get(channel) if holder is not None else None
        if holder is None or blob is None or blob.version != version:
            self._damaged(d, channel, version, None)
        return holder

    def _damaged(self, d: LanggraphCheckpointData, channel: str, version: object,
                 base: object) -> NoReturn:
        what = (f"extends version {base!r}, which is not stored" if base is not None
                else "is not stored where the thread says")
        msg = (f'thread "{self.thread_id}": the value of channel "{channel}" (namespace '
               f'"{d.ns}") at version {version!r}, read for checkpoint "{d.id}", {what}: '
               f"the thread's log was damaged; restore it from a copy, or delete the "
               f"thread (delete_thread) to start it anew")
        raise PersistenceError(msg, session_id=self.thread_id)


#: What a saver keeps of the tails its row reads made, by thread: (namespace, channel)
#: -> the checkpoint read and the channel's tail there.
Stash = dict[tuple[str, str], tuple[str, Tail]]


def stash(kept: Stash, d: LanggraphCheckpointData, tails: dict[tuple[str, str], Tail]) -> None:
    """Keep the tails a row read of ``d`` made (as a read of the index would set
    them: each of ``d``'s channels' tail replaced)."""
    for channel in d.channel_versions:
        kept.pop((d.ns, channel), None)
    for key, tail in tails.items():
        kept[key] = (d.id, tail)


def adopt(index: ThreadIndex, kept: Stash) -> None:
    """Give ``index`` (a writer's, folded from the log) the tails of ``kept`` it has
    none of: each made on the blob the index finds for the same checkpoint when that
    blob is equal, then as the index's own object (the next put's delta is planned only
    on the very blob its parent finds, :meth:`Codec._delta <._codec.Codec._delta>`)."""
    for (ns, channel), (cid, tail) in kept.items():
        d = index.checkpoints.get((ns, cid))
        if (ns, channel) in index.tails or d is None:
            continue
        blob = index.blob(ns, channel, d.channel_versions.get(channel), d)
        if blob is not None and blob == tail.blob:
            index.tails[(ns, channel)] = dataclasses.replace(tail, blob=blob)
