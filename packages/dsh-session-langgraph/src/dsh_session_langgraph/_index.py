"""What the saver knows of one thread: :class:`ThreadIndex`, a fold of its log.

Built once from the log, then brought up to date by folding only the events stored
after the last one it folded (a tail read, or the news a writer's ``open`` brings), so
that ``get_tuple`` and ``list`` cost what they return, not the length of the log. It
holds the checkpoints by namespace (their ids in order: LangGraph's ids sort as they
were made), each channel's blob by version, each checkpoint's pending writes, and what
the message recorder needs (the turn, the messages and tool calls already recorded).

A channel's version is not always unique in a thread: the saver's versions are
LangGraph's default integers, and a fork (a run or ``update_state`` from an older
checkpoint) makes versions its parent's successors made on the other branch (with
another value, or none). In a namespace that forked, a checkpoint's value of a channel is
therefore found by its ancestry: the blob its nearest ancestor (or itself) holding that
version wrote, none if the one that made the version wrote none (it emptied the
channel); that is what the peers' unique versions find. A namespace that never forked
(the usual thread: one chain) finds it by version alone.
"""

from __future__ import annotations

__all__ = ["NULL_TASK_ID", "ThreadIndex", "makers", "node_of"]

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dsh_session_core import Event, PersistenceError, ToolCallBlock

from ._deltas import Tail
from .events import (
    LanggraphCheckpoint,
    LanggraphCheckpointData,
    LanggraphRemoved,
    LanggraphWrites,
    TypedBlob,
)

#: A pending write as the index keeps it: (task_id, channel, value, task_path, idx).
StoredWrite = tuple[str, str, TypedBlob, str, int]
#: A channel's value at a version: (ns, channel, version).
BlobKey = tuple[str, str, object]
#: A blob found, and the checkpoint that wrote it (``None``: found by version alone).
Found = tuple[TypedBlob | None, LanggraphCheckpointData | None]


#: The event classes and types :meth:`ThreadIndex.fold` reads.
_PLUGIN = frozenset({LanggraphCheckpoint, LanggraphWrites, LanggraphRemoved})
_CORE = frozenset({"turn/start", "turn/end", "step/start", "step/end", "assistant/message",
                   "tool/call"})
#: The special channels whose writes start or end a run's turn (:mod:`._turns`); a
#: task's write of only these does not say it finished (it paused, or failed).
_MARKS = frozenset({"__interrupt__", "__error__", "__resume__"})
INTERRUPT, RESUME = "__interrupt__", "__resume__"
#: The task id of the writes a graph's input ``Command`` makes (LangGraph's).
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"


def node_of(task_path: str) -> str:
    """The node a task's path names last (``"~__pregel_pull, agent"``: ``agent``)."""
    return task_path.rsplit(", ", 1)[-1]


def makers(d: LanggraphCheckpointData, parent: LanggraphCheckpointData) -> list[str]:
    """The nodes whose tasks, run on ``parent``, made ``d``: those whose
    ``versions_seen`` changed."""
    return [node for node, seen in d.versions_seen.items()
            if node != INTERRUPT and parent.versions_seen.get(node) != seen]


def _before(held: object, version: object) -> bool:
    """Whether a checkpoint holding ``held`` of a channel comes before ``version`` was
    made (versions grow along a chain); ``False`` when they do not compare."""
    try:
        return held is None or bool(held < version)  # type: ignore[operator]
    except TypeError:
        return False


@dataclass
class ThreadIndex:
    """The fold of one thread's log (see the module's docstring).

    :ivar folded: how many events of the log are folded (the next one's seq).
    :ivar last: the last event folded (to tell a log that still continues ours).
    """

    thread_id: str
    folded: int = 0
    last: Event | None = None
    #: (ns, checkpoint id) -> the checkpoint's payload.
    checkpoints: dict[tuple[str, str], LanggraphCheckpointData] = field(default_factory=dict)
    #: ns -> its checkpoint ids, oldest first.
    ids: dict[str, list[str]] = field(default_factory=dict)
    #: (ns, channel, version) -> the blob of that channel's value at that version (the
    #: last stored, when branches made the same version).
    blobs: dict[BlobKey, TypedBlob] = field(default_factory=dict)
    #: (ns, channel, version) -> the id of the checkpoint that wrote ``blobs``' blob.
    makers: dict[BlobKey, str] = field(default_factory=dict)
    #: The namespaces whose checkpoints do not form one chain (see the module's
    #: docstring): a checkpoint stored whose parent was not the namespace's latest.
    forked: set[str] = field(default_factory=set)
    #: In those: (ns, checkpoint id, channel) -> the blob of the channel's value at the
    #: checkpoint's version and the checkpoint that wrote it, as found (each checkpoint
    #: once: a long chain after a fork is not walked again at each read).
    found: dict[tuple[str, str, str], Found] = field(default_factory=dict)
    #: (ns, channel) -> the channel's :class:`Tail`. Not the log's: what this saver
    #: stored or read last, dropped with the index.
    tails: dict[tuple[str, str], Tail] = field(default_factory=dict)
    #: (ns, checkpoint id) -> (task id, idx) -> the write.
    writes: dict[tuple[str, str], dict[tuple[str, int], StoredWrite]] = field(
        default_factory=dict)
    #: The message recorder's state: the last turn, the ids of the LangChain messages
    #: recorded, the seq of each tool call's ``tool/call``.
    turn: int = 0
    #: The horizon of the last rewrite (``LanggraphRemoved.through``), or None.
    horizon: str | None = None
    messages: set[str] = field(default_factory=set)
    calls: dict[str, int] = field(default_factory=dict)
    #: The turn state :mod:`._turns` reads: the open turn (``None``: none), the seq of its
    #: ``turn/start``, its open step and last step, the calls the open step's assistant
    #: message announced, the root checkpoints stored in it, and whether its first event
    #: is a write for a checkpoint not stored yet (a run's write ahead of its put).
    open_turn: int | None = None
    turn_seq: int = -1
    open_step: int | None = None
    steps: int = 0
    step_calls: set[str] = field(default_factory=set)
    turn_checkpoints: set[str] = field(default_factory=set)
    turn_early: bool = False
    #: (root checkpoint id, node) for each task that made a root checkpoint stored in
    #: the open turn and has not stored its writes (:meth:`finished`) on that checkpoint's
    #: parent yet: the open turn's run is not over while one is awaited. A resume whose
    #: first write stored is a task's awaits the null task's (``(checkpoint id,
    #: NULL_TASK_ID)``), which LangGraph stores beside it.
    awaited: set[tuple[str, str]] = field(default_factory=set)
    #: Root checkpoint id -> the seq of the null task's last ``__resume__`` write on it.
    null_resumes: dict[str, int] = field(default_factory=dict)
    #: Each tool call's name and arguments, from the assistant message announcing it.
    call_info: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Root checkpoint id -> special channel (interrupt, error, resume) -> the seq of
    #: the last write of it on that checkpoint.
    marks: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The time (epoch ms) of a rewrite's pending marker when it is the log's last
    #: plugin event (a rewrite under way: writers wait), else None.
    rewriting: float | None = None

    @property
    def fresh(self) -> bool:
        """``False``: what a read gives of the index is copied (it outlives the read)."""
        return False

    def fold(self, events: Iterable[Event]) -> None:
        """Fold ``events``, the log's next ones, in order."""
        last = None
        for event in events:  # most events are none of these: passed over cheaply
            last = event
            if event.__class__ in _PLUGIN or event.type in _CORE:
                self._see(event)
        if last is not None:
            self.folded = last.seq + 1
            self.last = last

    def continues(self, events: Sequence[Event]) -> bool:
        """Whether ``events`` (a log from its start) still holds what was folded, so
        that only the rest needs folding (else the log was rewritten: fold it anew)."""
        if self.folded == 0:
            return True
        return len(events) >= self.folded and events[self.folded - 1] == self.last

    def latest(self, ns: str) -> str | None:
        """The newest checkpoint id of ``ns``, or ``None``."""
        ids = self.ids.get(ns)
        return ids[-1] if ids else None

    def removed(self, checkpoint_id: str) -> bool:
        """Whether a write naming ``checkpoint_id`` is a late one: the thread does not
        hold it, and it was made no later than the last rewrite."""
        return self.horizon is not None and checkpoint_id <= self.horizon

    def finished(self, checkpoint_id: str, node: str) -> bool:
        """Whether a task of ``node`` stored on root checkpoint ``checkpoint_id`` a write
        saying it finished: of a channel other than an interrupt's, an error's or a
        resume's (LangGraph has a task that finished with no output write
        ``__no_writes__``)."""
        return any(channel not in _MARKS and node_of(path) == node for _, channel, _, path, _
                   in self.writes.get(("", checkpoint_id), {}).values())

    def namespaces(self) -> list[str]:
        return [ns for ns, ids in self.ids.items() if ids]

    def blob(self, ns: str, channel: str, version: object,
             start: LanggraphCheckpointData | None) -> TypedBlob | None:
        """The blob of ``channel``'s value at ``version`` in the ancestry of checkpoint
        ``start`` (see the module's docstring); ``None``: no value."""
        return self.held(ns, channel, version, start)[0]

    def held(self, ns: str, channel: str, version: object,
             start: LanggraphCheckpointData | None) -> Found:
        """:meth:`blob`, and the checkpoint that wrote it when it was found by
        ``start``'s ancestry (``None`` when found by version alone)."""
        key = (ns, channel, version)
        if start is None or ns not in self.forked:
            # Its own first: a version stored again (by a caller's put, as LangGraph
            # does not) names the blob of each checkpoint that wrote it there.
            own = start.blobs.get(channel) if start is not None else None
            if own is not None and own.version == version:
                return own, start
            return self.blobs.get(key), None
        d = start  # up to the checkpoint holding ``version`` (a delta's base: not far)
        while d.channel_versions.get(channel) != version:
            if _before(d.channel_versions.get(channel), version) or d.parent_id is None:
                return None, None  # made before the version, or the chain's start
            parent = self.checkpoints.get((ns, d.parent_id))
            if parent is None:  # a parent removed (a rewrite): by version alone
                return self.blobs.get(key), None
            d = parent
        return self._own(d, channel)

    def writer(self, ns: str, channel: str, version: object,
               start: LanggraphCheckpointData | None) -> str | None:
        """The id of the checkpoint whose blob :meth:`blob` finds; ``None``: no value."""
        blob, by = self.held(ns, channel, version, start)
        if blob is None:
            return None
        return by.id if by is not None else self.makers.get((ns, channel, version))

    def sources(self, d: LanggraphCheckpointData) -> dict[str, str]:
        """``d.sources`` (see :class:`~.events.LanggraphCheckpointData`) for ``d``, a
        checkpoint about to be stored: where this index finds each of its values that
        ``d``'s blobs do not hold (and each delta's base), by checkpoint id. Found from
        ``d``'s parent, whose ancestry is ``d``'s: before ``d`` is stored, a namespace
        that ``d`` forks is still one chain, where a version names one blob."""
        parent = (self.checkpoints.get((d.ns, d.parent_id)) if d.parent_id is not None
                  else None)
        out: dict[str, str] = {}
        for channel, version in d.channel_versions.items():
            own = d.blobs.get(channel)
            if own is not None and own.version == version:
                if own.base is None:
                    continue
                found = self.writer(d.ns, channel, own.base, parent)
            elif parent is not None:
                if parent.channel_versions.get(channel) != version:
                    continue  # made by ``d`` with no value
                found = self.writer(d.ns, channel, version, parent)
            elif d.parent_id is not None:  # its parent removed (a rewrite): by version
                key = (d.ns, channel, version)
                found = self.makers.get(key) if key in self.blobs else None
            else:
                continue
            if found is not None:
                out[channel] = found
        return out

    def _own(self, d: LanggraphCheckpointData, channel: str) -> Found:
        """The blob of ``channel`` at ``d``'s own version, by its ancestry: written by
        ``d``, or by the ancestor that made the version (none if it wrote none)."""
        version = d.channel_versions.get(channel)
        walked: list[LanggraphCheckpointData] = []
        result: Found = (None, None)
        while (known := self.found.get((d.ns, d.id, channel))) is None:
            walked.append(d)
            own = d.blobs.get(channel)
            if own is not None and own.version == version:
                result = (own, d)
                break
            if d.parent_id is None or len(walked) > len(self.checkpoints):
                break  # the chain's start: nothing wrote the version
            parent = self.checkpoints.get((d.ns, d.parent_id))
            if parent is None:  # a parent removed (a rewrite): by version alone
                result = (self.blobs.get((d.ns, channel, version)), None)
                break
            if parent.channel_versions.get(channel) != version:
                break  # ``d`` made the version, writing no value
            d = parent
        else:
            result = known
        for w in walked:
            self.found[(w.ns, w.id, channel)] = result
        return result

    def chain(self, d: LanggraphCheckpointData, channel: str) -> list[TypedBlob]:
        """The blobs that make ``d``'s value of ``channel``: its own, then, while it is a
        delta, the base's (each found from the checkpoint the delta extends), ending
        with a full value; ``[]`` when ``d`` holds no value of it.

        :raises PersistenceError: a base is missing (a damaged log).
        """
        version = d.channel_versions.get(channel)
        blob, writer = self.held(d.ns, channel, version, d)
        if blob is None:
            return []
        pieces = [blob]
        while (base := pieces[-1].base) is not None:
            start = (self.checkpoints.get((d.ns, writer.parent_id))
                     if writer is not None and writer.parent_id is not None else None)
            found, writer = self.held(d.ns, channel, base, start)
            if found is None or len(pieces) > len(self.blobs):
                what = "is not stored" if found is None else "closes a loop"
                msg = (f'thread "{self.thread_id}": the value of channel "{channel}" '
                       f'(namespace "{d.ns}") at version {pieces[-1].version!r}, read for '
                       f'checkpoint "{d.id}", extends version {base!r}, which {what}: '
                       f"the thread's log was damaged; restore it from a copy, or "
                       f"delete the thread (delete_thread) to start it anew")
                raise PersistenceError(msg, session_id=self.thread_id)
            pieces.append(found)
        return pieces

    def _see(self, event: Event) -> None:
        if isinstance(event, LanggraphCheckpoint):
            d = event.data
            key = (d.ns, d.id)
            before = self.checkpoints.get(key)
            ids = self.ids.setdefault(d.ns, [])
            if before is None and ids and (d.parent_id != ids[-1] or d.id < ids[-1]):
                self.forked.add(d.ns)  # not the next link of one chain
            elif before is not None and before.parent_id != d.parent_id:
                self.forked.add(d.ns)
            if before is not None or (ids and d.id < ids[-1]):
                self.found.clear()  # stored again, or among the others: found anew
            if before is None:
                bisect.insort(ids, d.id)
            self.checkpoints[key] = d
            for channel, blob in d.blobs.items():
                self.blobs[(d.ns, channel, blob.version)] = blob
                self.makers[(d.ns, channel, blob.version)] = d.id
            self.messages.update(d.recorded)
            self.rewriting = None
            if d.ns == "" and self.open_turn is not None:
                self.turn_checkpoints.add(d.id)
                parent = self.checkpoints.get(("", d.parent_id)) if d.parent_id else None
                if parent is not None:
                    self.awaited.update((parent.id, node) for node in makers(d, parent)
                                        if not self.finished(parent.id, node))
        elif isinstance(event, LanggraphWrites):
            self.rewriting = None
            w = event.data
            if w.ns == "":
                for write in w.writes:
                    if write.channel in _MARKS:
                        self.marks.setdefault(w.checkpoint_id, {})[write.channel] = event.seq
                if (self.open_turn is not None and event.seq == self.turn_seq + 1
                        and (w.ns, w.checkpoint_id) not in self.checkpoints):
                    self.turn_early = True
                if self.awaited and any(x.channel not in _MARKS for x in w.writes):
                    self.awaited.discard((w.checkpoint_id, node_of(w.task_path)))
                if any(x.channel == RESUME for x in w.writes):
                    self._resumed(w.checkpoint_id, w.task_id, event.seq)
            table = self.writes.setdefault((w.ns, w.checkpoint_id), {})
            for write in w.writes:
                table[(w.task_id, write.idx)] = (w.task_id, write.channel, write.value,
                                                 w.task_path, write.idx)
        elif isinstance(event, LanggraphRemoved):
            through = event.data.through
            self.horizon = through if self.horizon is None else max(self.horizon, through)
            self.rewriting = event.time if event.data.pending else None
        else:
            self._see_core(event)

    def _resumed(self, checkpoint_id: str, task_id: str, seq: int) -> None:
        """A ``__resume__`` write on root checkpoint ``checkpoint_id`` (see
        :attr:`awaited`)."""
        key = (checkpoint_id, NULL_TASK_ID)
        if task_id == NULL_TASK_ID:
            self.null_resumes[checkpoint_id] = seq
            self.awaited.discard(key)
        elif (self.open_turn is not None
              and self.null_resumes.get(checkpoint_id, -1) <= self.turn_seq):
            self.awaited.add(key)

    def _see_core(self, event: Event) -> None:
        t, data = event.type, event.data
        if t == "turn/start":
            self.turn = self.open_turn = data.turn
            self.turn_seq, self.open_step, self.steps = event.seq, None, 0
            self.step_calls = set()
            self.turn_checkpoints = set()
            self.turn_early = False
            self.awaited = set()
        elif t == "turn/end":
            self.open_turn = self.open_step = None
            self.step_calls = set()
        elif t == "step/start":
            self.open_step = self.steps = data.step
            self.step_calls = set()
        elif t == "step/end":
            self.open_step = None
            self.step_calls = set()
        elif t == "assistant/message":
            for block in getattr(data, "content", ()):
                if isinstance(block, ToolCallBlock):
                    self.call_info[block.id] = (block.name, block.arguments)
                    if self.open_step is not None:
                        self.step_calls.add(block.id)
        elif t == "tool/call":
            self.calls[data.call_id] = event.seq
