"""The rewrites of ``delete_thread``, ``prune`` and ``delete_for_runs``: a thread's log
replaced by one holding only the checkpoints kept, so that what is deleted is gone from
the store (space freed), not merely hidden.

The new log starts with ``langgraph/removed`` (how many were removed, the newest id
among them: the horizon a late write is told by); a deleted thread holds only that.
The log is read, deleted (the store's delete takes the writer lock without waiting, so
a thread another writer holds is not touched: the caller tries again), then written
anew through the same turns a ``put`` writes: each kept checkpoint, oldest first, with
the blobs of its channels that no earlier kept checkpoint carries (a value written by a
checkpoint that is dropped moves to the first kept one needing it), its new messages
recorded again, then its writes. The parent ids stay as they were: a kept checkpoint
whose parent was dropped names a checkpoint the thread no longer holds, as LangGraph's
own savers leave it.
"""

from __future__ import annotations

__all__ = ["rewrite"]

from collections.abc import Callable

import msgspec

from dsh_session_core import DurableStore

from ._codec import Codec
from ._index import StoredWrite, ThreadIndex
from ._messages import new_messages, write_turn
from .events import (
    LanggraphCheckpoint,
    LanggraphCheckpointData,
    LanggraphRemovedData,
    LanggraphWrite,
    LanggraphWritesData,
)


def rewrite(store: DurableStore, codec: Codec, thread_id: str,
            keep: Callable[[LanggraphCheckpointData], bool], reason: str) -> None:
    """Rewrite ``thread_id``'s log keeping the checkpoints ``keep`` is true of (see the
    module's docstring), for ``reason`` (the operation); nothing is written when it
    keeps them all.

    :raises SessionLockedError: another writer holds the thread (nothing was changed).
    """
    source = store.read_session(thread_id)
    old = ThreadIndex(thread_id)
    old.fold(source.events)
    order: dict[tuple[str, str], None] = {}
    for event in source.events:
        if isinstance(event, LanggraphCheckpoint):
            order.setdefault((event.data.ns, event.data.id))
    kept = [old.checkpoints[key] for key in order if keep(old.checkpoints[key])]
    if len(kept) == len(order):
        return
    through = max(cid for ns, cid in order if not keep(old.checkpoints[(ns, cid)]))
    if old.horizon is not None:
        through = max(through, old.horizon)
    store.delete(thread_id)
    session = store.open_or_create(thread_id)  # a writer may have made it meanwhile
    new = ThreadIndex(thread_id)
    new.fold(session.events)
    try:
        write_turn(session, new, "langgraph/removed", LanggraphRemovedData(
            through=through, checkpoints=len(order) - len(kept), reason=reason))
        for d in kept:
            blobs = {ch: old.blobs[(d.ns, ch, v)] for ch, v in d.channel_versions.items()
                     if (d.ns, ch, v) not in new.blobs and (d.ns, ch, v) in old.blobs}
            found = (new_messages(new, codec.value(blobs["messages"]))
                     if d.ns == "" and "messages" in blobs else [])
            data = msgspec.structs.replace(d, blobs=blobs, recorded=[m.id for m in found])
            write_turn(session, new, "langgraph/checkpoint", data, found)
            tasks: dict[tuple[str, str], list[StoredWrite]] = {}
            for w in old.writes.get((d.ns, d.id), {}).values():
                tasks.setdefault((w[0], w[3]), []).append(w)
            for (task_id, task_path), writes in tasks.items():
                write_turn(session, new, "langgraph/writes", LanggraphWritesData(
                    ns=d.ns, checkpoint_id=d.id, task_id=task_id, task_path=task_path,
                    writes=[LanggraphWrite(idx=w[4], channel=w[1], value=w[2])
                            for w in writes]))
        store.release(session)
    except BaseException:
        store.discard(session)
        raise
