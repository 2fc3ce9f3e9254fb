"""``DshCheckpointSaver``: LangGraph's ``BaseCheckpointSaver`` on a dsh-session store.

A thread is a session; its checkpoints and writes are the plugin's events, a run's in
one turn (:mod:`._turns`), the threads' locks and indexes :mod:`._lease`'s, the
values' encoding :mod:`._codec`'s, the rewrites of ``prune`` and ``delete_for_runs``
:mod:`._rewrite`'s. Each async method runs its sync twin in a worker thread.
"""

from __future__ import annotations

__all__ = ["DshCheckpointSaver"]

import asyncio
import bisect
import builtins
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import msgspec
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from dsh_session_core import DurableStore, PersistenceError, open_store
from dsh_session_core.errors import SessionForkError, UnknownProjectionError

from ._codec import Chains, Codec, Shared, config_of
from ._index import StoredWrite, ThreadIndex
from ._lease import Threads, Writing, retrying
from ._messages import human_input, new_messages
from ._projection import CHECKPOINTS
from ._rewrite import Keep, rewrite
from ._rows import RowReader, Stash, _Unfollowable, adopt, stash
from ._turns import RESUME, close_open, record_put, record_writes
from .errors import CheckpointConflictError, UnknownCheckpointError
from .events import (
    LanggraphCheckpoint,
    LanggraphCheckpointData,
    LanggraphWrite,
    LanggraphWritesData,
)

#: How long a write waits for another writer of the thread before it gives up.
DEFAULT_LOCK_TIMEOUT = 30.0
#: How long a write keeps the thread's writer lock for the next one (docs/langgraph.md).
DEFAULT_IDLE_WINDOW = 0.25

_Candidate = tuple[Chains, LanggraphCheckpointData, list[StoredWrite]]


def _ids(config: RunnableConfig) -> tuple[str, str, str | None]:
    c = config["configurable"]
    return str(c["thread_id"]), str(c.get("checkpoint_ns", "")), c.get("checkpoint_id")


class DshCheckpointSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer whose threads are dsh-session logs.

    :param store: a store URL (``"sqlite:///graph.db"``, a folder, ``postgresql://...``;
        opened here, closed by :meth:`close`), a :class:`DurableStore` of the caller's
        (left open), or ``None`` for the default store.
    :param serde: LangGraph's serializer (``JsonPlusSerializer`` by default).
    :param lock_timeout: seconds a write waits for another writer of the thread (another
        process, another store object) before raising ``SessionLockedError``.
    :param idle_window: seconds a write keeps the thread's writer lock after it returns
        (durable), so that the next write within the window neither takes the lock nor
        looks at the log; another process's writer waits that long at most (and its
        polling step) once this saver is idle. ``0`` releases it at each write's end.

    Every write takes the thread's writer lock, so one writer at a time writes a
    thread, across processes; a ``put`` that does not continue what another writer
    stored since this saver last read the thread is refused
    (:class:`~.errors.CheckpointConflictError`), and a write naming a checkpoint the
    thread no longer holds (deleted, pruned) is refused
    (:class:`~.errors.UnknownCheckpointError`): a late write cannot bring a deleted
    thread back.
    """

    def __init__(self, store: DurableStore | str | None = None, *,
                 serde: SerializerProtocol | None = None,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 idle_window: float = DEFAULT_IDLE_WINDOW) -> None:
        super().__init__(serde=serde)
        self._owns_store = not isinstance(store, DurableStore)
        self.store: DurableStore = store if isinstance(store, DurableStore) else open_store(store)
        self._codec = Codec(self.serde)
        self._threads = Threads(self.store, lock_timeout, idle_window)
        #: The tails row reads made, by thread, until a write's index takes them.
        self._stashed: dict[str, Stash] = {}
        #: The threads this saver wrote: :meth:`close` ends the turn they left open.
        self._opened: set[str] = set()

    # --- writes ---------------------------------------------------------------------

    def put(self, config: RunnableConfig, checkpoint: Checkpoint,
            metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Store a checkpoint, the blobs of ``new_versions`` only, and record the new
        messages of the root namespace's ``messages`` channel as core events."""
        tid, ns, parent = _ids(config)
        serializable = get_serializable_checkpoint_metadata(config, metadata)
        messages = checkpoint["channel_values"].get("messages") if (
            ns == "" and "messages" in new_versions) else None
        with self._threads.locked(tid), self._threads.writing(tid, create=True) as w:
            assert w is not None
            self._adopt(tid, w.index)
            _check_parent(w, tid, ns, parent, checkpoint["id"])
            # Encoded here, on the index as the log holds it: a list value extending
            # the parent's is stored as what it adds (._codec).
            data, planned = self._codec.checkpoint_data(w.index, ns, parent, checkpoint,
                                                        serializable, new_versions)
            found = new_messages(w.index, messages) if messages is not None else []
            data = msgspec.structs.replace(data, recorded=[m.id for m in found],
                                           sources=w.index.sources(data))
            record_put(w.session, w.index, data, found, ns == "" and human_input(
                checkpoint["channel_values"].get("__start__")), self._codec.value)
            self._opened.add(tid)
            self._codec.keep_tails(w.index, ns, checkpoint, planned)
        return config_of(tid, ns, checkpoint["id"])

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store a task's writes against a checkpoint of the thread; a write the
        checkpoint has already (same task and index) is not stored again, except the
        special channels' (errors, interrupts...), which replace theirs."""
        tid, ns, cid = _ids(config)
        if cid is None:
            msg = f'put_writes on thread "{tid}" needs the checkpoint_id the writes are for'
            raise ValueError(msg)
        special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        items = [(WRITES_IDX_MAP.get(channel, i), channel, value)
                 for i, (channel, value) in enumerate(writes)]
        # LangGraph stores a checkpoint's writes while its put may still be under way
        # (in another worker): writes for a checkpoint the thread does not hold yet are
        # stored, unless the id is one a rewrite removed (a late write).
        with self._threads.locked(tid), self._threads.writing(tid, create=True) as w:
            assert w is not None
            self._adopt(tid, w.index)
            if (ns, cid) not in w.index.checkpoints and w.index.removed(cid):
                raise _unknown(tid, ns, cid, "put_writes")
            table = w.index.writes.get((ns, cid), {})
            new = [LanggraphWrite(idx=idx, channel=channel, value=self._codec.blob(value))
                   for idx, channel, value in items
                   if special or (task_id, idx) not in table]
            if new:
                resume = [value for channel, value in writes if channel == RESUME]
                record_writes(w.session, w.index, LanggraphWritesData(
                    ns=ns, checkpoint_id=cid, task_id=task_id, task_path=task_path,
                    writes=new), resume[-1] if resume else None, bool(resume),
                    self._codec.value)
                self._opened.add(tid)

    # --- reads ----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names, or its namespace's latest."""
        tid, ns, cid = _ids(config)
        with self._threads.locked(tid):
            reader = self._reader(tid)
            picked = None
            if reader is not None:
                with contextlib.suppress(_Unfollowable):
                    picked = reader.select(ns, cid, None, None, 1)
        if reader is not None and picked is not None:
            if not picked:
                return None
            row, row_writes = picked[0]
            # The checkpoint a graph goes on from: its lists are the tails its next put
            # extends (kept until a write folds the thread).
            found = self._codec.checkpoint_tuple(reader, row, row_writes, tails=True)
            stash(self._stashed.setdefault(tid, {}), row, reader.tails)
            return found
        with self._threads.locked(tid):
            index = self._threads.read(tid)
            if index is None:
                return None
            cid = cid if cid is not None else index.latest(ns)
            d = index.checkpoints.get((ns, cid)) if cid is not None else None
            if d is None:
                return None
            writes = list(index.writes.get((ns, d.id), {}).values())
        # The checkpoint a graph goes on from: its lists are the tails its next put
        # extends.
        return self._codec.checkpoint_tuple(index, d, writes, tails=True)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None
             ) -> Iterator[CheckpointTuple]:
        """The checkpoints of the config's thread (every thread's without one), of its
        namespace when it names one, newest first; only those whose metadata holds
        ``filter``'s items, older than ``before``'s checkpoint, at most ``limit``."""
        shared: Shared = {}  # the pieces a value shares with the others' decoded once
        for index, d, writes in self._candidates(config, filter, before, limit):
            yield self._codec.checkpoint_tuple(index, d, writes, shared=shared)

    def _candidates(self, config: RunnableConfig | None, filter: dict[str, Any] | None,
                    before: RunnableConfig | None, limit: int | None
                    ) -> builtins.list[_Candidate]:
        if config is not None:
            tids = [str(config["configurable"]["thread_id"])]
            c = config["configurable"]
            only_ns = str(c["checkpoint_ns"]) if "checkpoint_ns" in c else None
            only_id = c.get("checkpoint_id")
        else:
            tids, only_ns, only_id = [h.id for h in self.store.stored()], None, None
        bound = before["configurable"].get("checkpoint_id") if before else None
        found: builtins.list[tuple[str, _Candidate]] = []
        for tid in tids:
            with self._threads.locked(tid):
                reader = self._reader(tid)
                if reader is not None:
                    try:
                        chosen = reader.select(only_ns, only_id, bound, filter, limit)
                    except _Unfollowable:
                        pass
                    else:
                        found.extend((d.id, (reader, d, writes)) for d, writes in chosen)
                        continue
                index = self._threads.read(tid)
                if index is None:
                    continue
                picked = 0
                for cid, ns in _newest_first(index, only_ns, bound):
                    if limit is not None and picked >= limit:
                        break
                    if only_id is not None and cid != only_id:
                        continue
                    d = index.checkpoints[(ns, cid)]
                    if filter and any(d.metadata.get(k) != v for k, v in filter.items()):
                        continue
                    picked += 1
                    found.append((cid, (index, d, list(index.writes.get((ns, cid), {})
                                                      .values()))))
        found.sort(key=lambda f: f[0], reverse=True)
        return [c for _, c in (found if limit is None else found[:limit])]

    # --- deletes, copies, pruning ---------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of the thread: its log is replaced by one
        holding only ``langgraph/removed``, so a late write naming one of them is
        refused rather than bringing the thread back."""
        self._remove([str(thread_id)], "delete_thread", _none)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """A fork: the target thread is a new session seeded with the source's whole
        log (every checkpoint, write and message); its header names the source. A
        source with nothing stored copies nothing. The source's open turn, if any, is
        ended first (a fork starts after a turn's end).

        :raises SessionForkError: the target thread exists already.
        """
        src, dst = str(source_thread_id), str(target_thread_id)
        with self._threads.locked(src, dst):
            if self._threads.open_turn(src):
                # A fork is cut at a turn's end: the source's open turn ends first (as
                # the next run's start would end it).
                with self._threads.writing(src, create=False) as w:
                    if w is not None:
                        close_open(w.session, w.index, self._codec.value)
            try:
                source = self.store.read_session(src)
            except PersistenceError:
                if self._threads.stored(src):
                    raise
                return
            if not any(isinstance(e, LanggraphCheckpoint) for e in source.events):
                return
            self._threads.forget(dst)
            target = self._threads.read(dst)
            if target is not None and target.checkpoints:
                msg = (f'copy_thread: thread "{dst}" holds checkpoints already; delete it '
                       f"first (delete_thread) or copy to a new thread id")
                raise SessionForkError(msg, "SESSION_ALREADY_EXISTS")
            if target is not None:  # a deleted thread: its tombstone gives way
                self._threads.forget(dst)
                # Not a removal (no record): the thread is made anew at once, below.
                retrying(lambda: self.store.delete(dst, rule=None),
                         self._threads.lock_timeout)
            self.store.release(self.store.fork(source, child_id=dst))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: rewrite each thread's log to hold only each namespace's
        latest checkpoint (with the values it needs and its writes); ``delete``: delete
        the threads."""
        if strategy not in ("keep_latest", "delete"):
            msg = f'prune strategy is "keep_latest" or "delete", got {strategy!r}'
            raise ValueError(msg)
        if strategy == "delete":
            self._remove(list(map(str, thread_ids)), "prune", _none)
        else:
            self._remove(list(map(str, thread_ids)), "prune", _latest)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) that these runs made
        (``metadata["run_id"]``), in every thread of the store: each thread holding one
        is rewritten without them."""
        runs = set(map(str, run_ids))
        if not runs:
            return
        tids = []
        for header in self.store.stored():
            with self._threads.locked(header.id):
                reader = self._reader(header.id)
                if reader is not None:
                    with contextlib.suppress(_Unfollowable):
                        if any(reader.newest(ns, None, 1, lambda d: d.metadata.get("run_id")
                                             in runs) for ns in reader.namespaces()):
                            tids.append(header.id)
                        continue
                index = self._threads.read(header.id)
            if index is not None and any(d.metadata.get("run_id") in runs
                                         for d in index.checkpoints.values()):
                tids.append(header.id)
        self._remove(tids, "delete_for_runs",
                     lambda index, d: d.metadata.get("run_id") not in runs)

    # --- which way a read goes ------------------------------------------------------

    def _reader(self, tid: str) -> RowReader | None:
        """A reader of the thread's rows, or ``None`` when the index is read instead:
        this saver holds the thread's index (it wrote it: the index is current after
        folding what others stored since), the store keeps no rows of the thread (its
        backend keeps none, or the thread was stored before the projection existed and
        not written since: the index folds the log once for the calls to come), the
        store does not know the projection, or the thread is not stored (the index's
        read says so). Call it holding ``locked(tid)``."""
        if self._threads.held(tid) or self.store.capabilities.projecting is None:
            return None
        try:
            view = self.store.projection(tid, CHECKPOINTS.name)
        except (UnknownProjectionError, PersistenceError):
            return None
        if view.folded and view.folded >= view.covers:  # no rows: the log was folded
            return None
        return RowReader(tid, view)

    def _adopt(self, tid: str, index: ThreadIndex) -> None:
        """Give a writer's index the tails this saver's row reads of the thread made."""
        kept = self._stashed.pop(tid, None)
        if kept:
            adopt(index, kept)

    def _remove(self, tids: builtins.list[str], reason: str, keep: Keep) -> None:
        """Rewrite each thread without the checkpoints ``keep`` is false of (decided
        under the thread's writer lock, on the log as it is then)."""
        for tid in tids:
            with self._threads.locked(tid):
                rewrite(self._threads, self._codec, tid, keep, reason)

    # --- asyncio twins: each runs the sync method in a worker thread ----------------

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions
                   ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(self._candidates, config, filter, before, limit)
        shared: Shared = {}
        for index, d, writes in found:
            yield await asyncio.to_thread(self._codec.checkpoint_tuple, index, d, writes,
                                          False, shared)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
                     ) -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    # --- the store ------------------------------------------------------------------

    def _end_turns(self) -> None:
        """End the turn each thread this saver wrote left open (its run paused before
        its next tasks, or stopped; see docs/langgraph.md)."""
        for tid in sorted(self._opened):
            if not self._threads.open_turn(tid):
                continue
            with self._threads.locked(tid), self._threads.writing(tid, create=False) as w:
                if w is not None:
                    close_open(w.session, w.index, self._codec.value)
        self._opened.clear()

    def close(self) -> None:
        """End the turns the threads this saver wrote left open (see docs/langgraph.md),
        the idle windows of those threads (their writer locks go now), and close the
        store if this saver opened it from a URL (safe to call again; the store is
        closed even when ending a turn fails)."""
        try:
            self._end_turns()
        finally:
            if self._owns_store:
                self.store.close()
            else:
                self._threads.end_idle()

    async def aclose(self) -> None:
        try:
            await asyncio.to_thread(self._end_turns)
        finally:
            if self._owns_store:
                await self.store.aclose()
            else:
                await asyncio.to_thread(self._threads.end_idle)

    def __enter__(self) -> DshCheckpointSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> DshCheckpointSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _none(index: ThreadIndex, d: LanggraphCheckpointData) -> bool:
    """Keep no checkpoint (delete_thread, prune's ``delete``)."""
    return False


def _latest(index: ThreadIndex, d: LanggraphCheckpointData) -> bool:
    """Keep each namespace's latest checkpoint (prune's ``keep_latest``)."""
    return index.latest(d.ns) == d.id


def _newest_first(index: ThreadIndex, only_ns: str | None, bound: str | None
                  ) -> Iterator[tuple[str, str]]:
    """``(id, ns)`` of the index's checkpoints (of ``only_ns``), newest first, older
    than ``bound`` when given."""
    spaces = [only_ns] if only_ns is not None else index.namespaces()
    lists = []
    for ns in spaces:
        ids = index.ids.get(ns, [])
        end = bisect.bisect_left(ids, bound) if bound is not None else len(ids)
        lists.append((ns, ids, end))
    if len(lists) == 1:
        ns, ids, end = lists[0]
        for i in range(end - 1, -1, -1):
            yield ids[i], ns
        return
    merged = sorted(((cid, ns) for ns, ids, end in lists for cid in ids[:end]), reverse=True)
    yield from merged


def _unknown(tid: str, ns: str, cid: str | None, what: str) -> UnknownCheckpointError:
    msg = (f'{what}: checkpoint "{cid}" (namespace "{ns}") was deleted from thread '
           f'"{tid}" (delete_thread, delete_for_runs or prune): a late write to a deleted '
           f"checkpoint is refused, nothing was stored; start the thread anew (no "
           f"checkpoint_id) or continue from its latest checkpoint (get_tuple)")
    return UnknownCheckpointError(msg, thread_id=tid, checkpoint_ns=ns, checkpoint_id=cid)


def _check_parent(w: Writing, tid: str, ns: str, parent: str | None, own: str) -> None:
    """Refuse a late put (its parent was removed; or, the first of its namespace, it
    was made before what was removed: LangGraph's ids sort by time), or one that forks
    a chain another writer moved on since this saver last read the thread."""
    held = w.index.checkpoints
    if parent is not None and (ns, parent) not in held and w.index.removed(parent):
        raise _unknown(tid, ns, parent, "put")
    if parent is None and (ns, own) not in held and w.index.removed(own):
        raise _unknown(tid, ns, own, "put")
    latest = w.index.latest(ns)
    if latest is not None and latest != w.known.get(ns) and latest != parent:
        msg = (f'put: another writer stored checkpoint "{latest}" in thread "{tid}" '
               f'(namespace "{ns}") since this saver last read it, and this checkpoint '
               f'continues "{parent}": two writers cannot both fork one chain. Read the '
               f"thread again (get_tuple) and continue from its latest checkpoint; "
               f"nothing was stored")
        raise CheckpointConflictError(msg, thread_id=tid, checkpoint_ns=ns,
                                      checkpoint_id=parent, latest_id=latest)
