"""The rewrites of ``delete_thread``, ``prune`` and ``delete_for_runs``: a thread's log
replaced by one holding only the checkpoints kept, so that what is deleted is gone from
the store (space freed), not merely hidden.

The new log starts with ``langgraph/removed`` (how many were removed, and the horizon a
late write is told by: the rewrite's moment as a LangGraph id, newer than every id
removed); a deleted thread holds only that.
The old log is read under the thread's writer lock (no write can land between the read
and what follows), and a pending ``langgraph/removed`` marker is appended to it before
the lock is released: the saver's writers, in any process, wait while it ends the log.
The log is then deleted (the store's delete takes the writer lock without waiting: a
writer that took it to look at the marker lets go, and the delete is tried again) and
written anew: the marker (a turn of its own, an injection from the plugin), then what
is kept, recorded again in the order the old log holds it, as the saver records a
``put`` and a ``put_writes`` (:mod:`._turns`), so the new log's turns are the runs', as
a log written live reads: a turn a run, a step a model call, a pause's ``awaiting
input`` end, a resume's ``langgraph/resume``. Each kept checkpoint (where the old log
first holds it) carries the blobs of its channels that no earlier kept checkpoint
carries (a value written by a checkpoint that is dropped moves to the first kept one
needing it) and records again the messages not recorded before; each ``put_writes`` on
a kept checkpoint is recorded with the writes the checkpoint still holds from it (one
a later write replaced is not). A turn the old log ended because its run was known to
have stopped (by ``close()``, the next run, a rewrite: ``awaiting input: the run
stopped ...``; by crash repair: ``interrupted``) is ended there too, the new log's
reason being the one its kept checkpoints give (see :func:`~._turns.stop_reason`); the
last turn left open is ended so. What is dropped leaves no event: a run whose
checkpoints are all dropped has no turn, except for its writes on a kept checkpoint
(a resume's, on the checkpoint it resumed). The parent ids stay as they were: a kept
checkpoint whose parent was dropped names a checkpoint the thread no longer holds, as
LangGraph's own savers leave it.

Between the delete and the new log's creation the thread is absent: a reader finds
nothing, and a writer that creates the thread meanwhile is not lost (what it stored is
kept, before the new log's events). A writer that is not a ``DshCheckpointSaver`` does
not know the marker: its write in the instant between the marker and the delete would
be deleted with the old log.
"""

from __future__ import annotations

__all__ = ["Keep", "rewrite"]

from collections.abc import Callable, Sequence

import msgspec
from langgraph.checkpoint.base.id import uuid6

from dsh_session_core import AbortedReason, Event, InterruptedReason, Session
from dsh_session_core.events import TurnEnd

from ._codec import Codec
from ._index import ThreadIndex
from ._lease import Threads, retrying
from ._messages import human_input, new_messages, write_turn
from ._turns import AWAITING, RESUME, close_open, record_put, record_writes
from .events import (
    LanggraphCheckpoint,
    LanggraphCheckpointData,
    LanggraphRemovedData,
    LanggraphWrites,
    TypedBlob,
)

#: Whether a rewrite keeps a checkpoint, asked with the thread's index as it is under the
#: writer lock (so that what it keeps is decided on the log it rewrites).
Keep = Callable[[ThreadIndex, LanggraphCheckpointData], bool]


def rewrite(threads: Threads, codec: Codec, thread_id: str,
            keep: Keep, reason: str) -> None:
    """Rewrite ``thread_id``'s log keeping the checkpoints ``keep`` is true of (see the
    module's docstring), for ``reason`` (the operation); nothing is written when it
    keeps them all. Call it holding ``threads.locked(thread_id)``.

    :raises SessionLockedError: another writer held the thread past the lock timeout
        (nothing was changed).
    """
    store = threads.store
    with threads.writing(thread_id, create=False) as w:
        if w is None:
            return
        old = w.index
        order = list(old.checkpoints)  # as first stored
        kept = {key for key in order if keep(old, old.checkpoints[key])}
        if len(kept) == len(order):
            return
        # The horizon is now, as a LangGraph id (they sort by time): a checkpoint made
        # before this rewrite and stored after it is late, even one made after the
        # newest removed (a put under way while the thread was deleted).
        through = max(str(uuid6()), *(cid for ns, cid in order if (ns, cid) not in kept))
        if old.horizon is not None:
            through = max(through, old.horizon)
        removed = LanggraphRemovedData(through=through, checkpoints=len(order) - len(kept),
                                       reason=reason)
        close_open(w.session, old, codec.value)  # the run's turn ends before the marker
        events = list(w.session.events)
        write_turn(w.session, old, "langgraph/removed",
                   msgspec.structs.replace(removed, pending=True))
    threads.forget(thread_id)
    # Not a removal (no record, its never-prune mark kept): the log is written anew
    # under the same id at once, below.
    retrying(lambda: store.delete(thread_id, rule=None), threads.lock_timeout)
    # A writer may have made the thread meanwhile: what it stored is kept, before.
    with threads.writing(thread_id, create=True) as w:
        assert w is not None
        close_open(w.session, w.index, codec.value)
        write_turn(w.session, w.index, "langgraph/removed", removed)
        _replay(w.session, w.index, old, codec, events, kept)
        close_open(w.session, w.index, codec.value)


def _stopped(event: TurnEnd) -> bool:
    """Whether a ``turn/end`` of the old log ended a turn because its run was known to
    have stopped, not because the run was seen to end (see the module's docstring)."""
    reason = event.data.reason
    return isinstance(reason, InterruptedReason) or (
        isinstance(reason, AbortedReason) and isinstance(reason.reason, str)
        and reason.reason.startswith(f"{AWAITING}: the run stopped"))


def _replay(session: Session, new: ThreadIndex, old: ThreadIndex, codec: Codec,
            events: Sequence[Event], kept: set[tuple[str, str]]) -> None:
    """Record again, in ``events``' order (the old log), the kept checkpoints and the
    writes on them (see the module's docstring)."""
    # Which writes event last wrote each (ns, checkpoint, task, idx): the one whose
    # write the checkpoint holds.
    last: dict[tuple[str, str, str, int], int] = {}
    for event in events:
        if isinstance(event, LanggraphWrites):
            w = event.data
            for x in w.writes:
                last[(w.ns, w.checkpoint_id, w.task_id, x.idx)] = event.seq
    copies: dict[int, TypedBlob] = {}
    done: set[tuple[str, str]] = set()
    for event in events:
        if isinstance(event, LanggraphCheckpoint):
            key = (event.data.ns, event.data.id)
            if key in kept and key not in done:
                done.add(key)
                _put_kept(session, new, old, codec, old.checkpoints[key], copies)
        elif isinstance(event, LanggraphWrites):
            w = event.data
            if (w.ns, w.checkpoint_id) not in kept:
                continue
            writes = [x for x in w.writes
                      if last[(w.ns, w.checkpoint_id, w.task_id, x.idx)] == event.seq]
            if writes:
                resume = [x.value for x in writes if x.channel == RESUME]
                record_writes(session, new, msgspec.structs.replace(w, writes=writes),
                              codec.value(resume[-1]) if resume else None, bool(resume),
                              codec.value)
        elif isinstance(event, TurnEnd) and _stopped(event):
            close_open(session, new, codec.value)


def _put_kept(session: Session, new: ThreadIndex, old: ThreadIndex, codec: Codec,
              d: LanggraphCheckpointData, copies: dict[int, TypedBlob]) -> None:
    """Record a kept checkpoint in the new log, with the blobs it needs that the new log
    does not hold yet (as ``d`` would find them there), and its messages not recorded
    yet. ``copies`` maps each old blob carried (by ``id``) to its copy in the new log; a
    delta is carried as it is when the new log holds its base as ``d`` finds it, else
    as the full value."""
    parent = new.checkpoints.get((d.ns, d.parent_id)) if d.parent_id else None
    blobs: dict[str, TypedBlob] = {}
    carried: dict[str, TypedBlob] = {}
    for ch, v in d.channel_versions.items():
        pieces = old.chain(d, ch)
        if not pieces or new.blob(d.ns, ch, v, parent) is copies.get(id(pieces[0]), False):
            continue  # no value, or the new log gives ``d`` this one already
        blob = pieces[0]
        if blob.base is not None and new.blob(d.ns, ch, blob.base, parent) is not copies.get(
                id(pieces[1]), False):
            blob = codec.blob(codec.joined(pieces), v)  # its base is not there: in full
        blobs[ch], carried[ch] = blob, pieces[0]
    found = (new_messages(new, codec.joined(old.chain(d, "messages")))
             if d.ns == "" and "messages" in blobs else [])
    data = msgspec.structs.replace(d, blobs=blobs, recorded=[m.id for m in found])
    data = msgspec.structs.replace(data, sources=new.sources(data))
    # The input, read only for an input checkpoint (the only one whose trigger it makes).
    start = (old.chain(d, "__start__")
             if d.ns == "" and d.metadata.get("source") == "input" else [])
    record_put(session, new, data, found,
               bool(start) and human_input(codec.joined(start)), codec.value)
    written = new.checkpoints[(d.ns, d.id)].blobs
    for ch, held in carried.items():
        copies[id(held)] = written[ch]
