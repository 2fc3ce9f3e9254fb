"""What the saver knows of one thread: :class:`ThreadIndex`, a fold of its log.

Built once from the log, then brought up to date by folding only the events stored
after the last one it folded (a tail read, or the news a writer's ``open`` brings), so
that ``get_tuple`` and ``list`` cost what they return, not the length of the log. It
holds the checkpoints by namespace (their ids in order: LangGraph's ids sort as they
were made), each channel's blob by version, each checkpoint's pending writes, and what
the message recorder needs (the turn, the messages and tool calls already recorded).
"""

from __future__ import annotations

__all__ = ["ThreadIndex"]

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dsh_session_core import Event

from .events import (
    LanggraphCheckpoint,
    LanggraphCheckpointData,
    LanggraphRemoved,
    LanggraphWrites,
    TypedBlob,
)

#: A pending write as the index keeps it: (task_id, channel, value, task_path, idx).
StoredWrite = tuple[str, str, TypedBlob, str, int]


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
    #: (ns, channel, version) -> the blob of that channel's value at that version.
    blobs: dict[tuple[str, str, object], TypedBlob] = field(default_factory=dict)
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
    #: The time (epoch ms) of a rewrite's pending marker when it is the log's last
    #: plugin event (a rewrite under way: writers wait), else None.
    rewriting: float | None = None

    def fold(self, events: Iterable[Event]) -> None:
        """Fold ``events``, the log's next ones, in order."""
        for event in events:
            self._see(event)
            self.folded = event.seq + 1
            self.last = event

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

    def namespaces(self) -> list[str]:
        return [ns for ns, ids in self.ids.items() if ids]

    def _see(self, event: Event) -> None:
        if isinstance(event, LanggraphCheckpoint):
            d = event.data
            key = (d.ns, d.id)
            if key not in self.checkpoints:
                bisect.insort(self.ids.setdefault(d.ns, []), d.id)
            self.checkpoints[key] = d
            for channel, blob in d.blobs.items():
                self.blobs[(d.ns, channel, blob.version)] = blob
            self.messages.update(d.recorded)
            self.rewriting = None
        elif isinstance(event, LanggraphWrites):
            self.rewriting = None
            w = event.data
            table = self.writes.setdefault((w.ns, w.checkpoint_id), {})
            for write in w.writes:
                table[(w.task_id, write.idx)] = (w.task_id, write.channel, write.value,
                                                 w.task_path, write.idx)
        elif isinstance(event, LanggraphRemoved):
            through = event.data.through
            self.horizon = through if self.horizon is None else max(self.horizon, through)
            self.rewriting = event.time if event.data.pending else None
        elif event.type == "turn/start":
            self.turn = event.data.turn
        elif event.type == "tool/call":
            self.calls[event.data.call_id] = event.seq
