"""Between LangGraph's values and the plugin's payloads: a checkpoint, its metadata and
its new channel values into :class:`~.events.LanggraphCheckpointData`; a stored
checkpoint back into a ``CheckpointTuple``; a write's value into a
:class:`~.events.TypedBlob` and back. Values go through the saver's serializer
(``dumps_typed``/``loads_typed``), their bytes in base64 (a JSON log line holds text).
A list value that extends its parent's is stored as a delta (:mod:`._deltas` chooses
when, and on which base); a read joins a delta's chain back.
"""

from __future__ import annotations

__all__ = ["Codec"]

import base64
import pickle
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, cast

import msgspec
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._deltas import Tail, full_tail, read_tail
from ._index import StoredWrite, ThreadIndex
from .events import LanggraphCheckpointData, TypedBlob


class Chains(Protocol):
    """What a read of a thread's checkpoints decodes from: the saver's
    :class:`~._index.ThreadIndex`, or a :class:`~._rows.RowReader` of its rows."""

    thread_id: str
    #: (namespace, channel) -> the channel's tail, for a read that sets them.
    tails: dict[tuple[str, str], Tail]

    @property
    def fresh(self) -> bool:
        """Whether the checkpoints it gives are this read's own, handed out as they are
        (else their fields are copied: the caller may change what it gets)."""
        ...

    def chain(self, d: LanggraphCheckpointData, channel: str) -> list[TypedBlob]:
        """The blobs that make ``d``'s value of ``channel``, head first."""
        ...


#: The list pieces one read decoded, by the piece's ``id`` (with the piece, so that the
#: id stays its own), pickled: the checkpoints ``list`` gives share their chains'
#: pieces, and a piece is deserialized once for all of them, each of the others given a
#: copy of its own (unpickled: a few times faster than LangGraph's serializer, and no
#: value shares an element with another). ``None``: a piece pickle cannot copy.
Shared = dict[int, tuple[TypedBlob, bytes | None]]


#: The checkpoint's keys that have fields of their own in the payload.
_FIELDS = frozenset({"v", "id", "ts", "channel_values", "channel_versions",
                     "versions_seen", "updated_channels"})


_ENCODE = msgspec.json.Encoder().encode


def _b64(data: bytes) -> str:
    """``data`` in base64, as ``base64.b64encode`` gives it (msgspec's, a few times
    faster: a conversation's value is read and written at every step)."""
    return _ENCODE(data)[1:-1].decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return msgspec.convert(text, bytes)
    except msgspec.ValidationError:  # not canonical base64: read as base64 reads it
        return base64.b64decode(text)


def config_of(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config naming one checkpoint."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                             "checkpoint_id": checkpoint_id}}


def _copy(value: Any) -> Any:
    """A copy of a JSON value (the index's stays as stored whatever the caller does)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


class Codec:
    """Encodes and decodes with one serializer (the saver's ``serde``)."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def blob(self, value: Any, version: Any = None) -> TypedBlob:
        kind, data = self.serde.dumps_typed(value)
        return TypedBlob(type=kind, data=_b64(data), version=version)

    def value(self, blob: TypedBlob) -> Any:
        return self.serde.loads_typed((blob.type, _unb64(blob.data)))

    def checkpoint_data(self, index: ThreadIndex, ns: str, parent_id: str | None,
                        checkpoint: Checkpoint, metadata: CheckpointMetadata,
                        new_versions: ChannelVersions
                        ) -> tuple[LanggraphCheckpointData, dict[str, Tail]]:
        """The payload of a ``put`` after checkpoint ``parent_id`` of ``index``'s
        thread: blobs for the channels of ``new_versions`` that hold a value (a channel
        emptied at a new version has none: it is not restored), a list that extends
        the parent's value of its channel as a delta; and the tails those deltas were
        made on (for :meth:`keep_tails`)."""
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        parent = index.checkpoints.get((ns, parent_id)) if parent_id is not None else None
        blobs = {}
        planned: dict[str, Tail] = {}
        for ch, new in new_versions.items():
            if ch in values:
                version = versions.get(ch, new)
                delta = self._delta(index, parent, ch, values[ch], version)
                if delta is None:
                    blobs[ch] = self.blob(values[ch], version)
                else:
                    blobs[ch], planned[ch] = delta
        extra = {k: v for k, v in checkpoint.items() if k not in _FIELDS and v}
        return LanggraphCheckpointData(
            ns=ns, id=checkpoint["id"], parent_id=parent_id, v=checkpoint["v"],
            ts=checkpoint["ts"], channel_versions=dict(versions),
            versions_seen={k: dict(v) for k, v in checkpoint["versions_seen"].items()},
            updated_channels=checkpoint.get("updated_channels"),
            metadata=cast(dict[str, Any], dict(metadata)), blobs=blobs,
            extra=self.blob(extra) if extra else None), planned

    def _delta(self, index: ThreadIndex, parent: LanggraphCheckpointData | None,
               channel: str, value: Any, version: Any) -> tuple[TypedBlob, Tail] | None:
        """``value`` as a delta on a value of ``channel``'s chain, when it is a list
        extending the parent's, the channel's tail (:mod:`._deltas`), and that tail;
        else ``None``."""
        if parent is None or value.__class__ is not list:
            return None
        tail = index.tails.get((parent.ns, channel))
        current = parent.channel_versions.get(channel)
        if (tail is None or current is None or current == version
                or index.blob(parent.ns, channel, current, parent) is not tail.blob):
            return None
        plan = tail.plan(value)
        if plan is None:
            return None
        (_, base, count), position = plan
        kind, data = self.serde.dumps_typed(value[count:])
        return TypedBlob(type=kind, data=_b64(data), version=version, base=base,
                         position=position), tail

    def keep_tails(self, index: ThreadIndex, ns: str, checkpoint: Checkpoint,
                   planned: dict[str, Tail]) -> None:
        """After a put of ``checkpoint`` (folded into ``index``): its new list values
        are their channels' tails, a delta's made from the tail it was planned on
        (``planned``, from :meth:`checkpoint_data`: a read may have replaced it
        meanwhile)."""
        stored = index.checkpoints.get((ns, checkpoint["id"]))
        if stored is None:
            return
        values = checkpoint["channel_values"]
        for channel, blob in stored.blobs.items():
            value = values.get(channel)
            if value.__class__ is list:
                tail = planned.get(channel)
                index.tails[(ns, channel)] = (
                    tail.then(blob, value) if tail is not None and blob.base is not None
                    else full_tail(blob, value))

    def channel_values(self, index: Chains, d: LanggraphCheckpointData,
                       tails: bool = False, shared: Shared | None = None
                       ) -> dict[str, Any]:
        """The values of ``d``'s channels, each from the blob of its version (joined
        with its chain's when it is a delta); with ``tails``, its list values become
        their channels' tails (``d`` is the checkpoint a graph goes on from); with
        ``shared``, the list pieces already decoded there are not decoded again."""
        values: dict[str, Any] = {}
        for channel in d.channel_versions:
            pieces = index.chain(d, channel)
            if not pieces or pieces[0].type == "empty":
                continue
            value, counts = self._joined(pieces, shared)
            values[channel] = value
            if tails and value.__class__ is list:
                tail = read_tail(pieces, counts, value)
                if tail is None:
                    index.tails.pop((d.ns, channel), None)
                else:
                    index.tails[(d.ns, channel)] = tail
        return values

    def joined(self, pieces: Sequence[TypedBlob]) -> Any:
        """The value of a chain (:meth:`ThreadIndex.chain`): its full value, followed by
        the elements each delta adds."""
        return self._joined(pieces)[0]

    def _joined(self, pieces: Sequence[TypedBlob], shared: Shared | None = None
                ) -> tuple[Any, list[int]]:
        """:meth:`joined`, and how many elements each piece holds (head first)."""
        if len(pieces) == 1:
            value = self._piece(pieces[0], shared)
            return value, [len(value) if value.__class__ is list else 0]
        value = list(self._piece(pieces[-1], shared))
        counts = [len(value)]
        for piece in reversed(pieces[:-1]):
            added = self._piece(piece, shared)
            value.extend(added)
            counts.append(len(added))
        return value, counts[::-1]

    def _piece(self, piece: TypedBlob, shared: Shared | None) -> Any:
        """A piece's value, of its own; a list deserialized once per ``shared``, then
        copied."""
        if shared is None:
            return self.value(piece)
        found = shared.get(id(piece))
        if found is not None and found[0] is piece and found[1] is not None:
            return pickle.loads(found[1])  # this read's own pickle
        value = self.value(piece)
        if found is None and value.__class__ is list:
            try:
                copy: bytes | None = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # not picklable: deserialized each time
                copy = None
            shared[id(piece)] = (piece, copy)
        return value

    def pending(self, writes: Iterable[StoredWrite]) -> list[PendingWrite]:
        """The writes in ``writes_sort_key`` order, as ``(task_id, channel, value)``."""
        ordered = sorted(writes, key=lambda w: writes_sort_key(w[3], w[0], w[4]))
        return [(task, channel, self.value(value)) for task, channel, value, _, _ in ordered]

    def checkpoint_tuple(self, index: Chains, d: LanggraphCheckpointData,
                         writes: Iterable[StoredWrite], tails: bool = False,
                         shared: Shared | None = None) -> CheckpointTuple:
        """``d`` as LangGraph reads it; ``shared``: as :meth:`channel_values`."""
        values = self.channel_values(index, d, tails, shared)
        if index.fresh:
            checkpoint: dict[str, Any] = {
                "v": d.v, "id": d.id, "ts": d.ts, "channel_values": values,
                "channel_versions": d.channel_versions, "versions_seen": d.versions_seen,
                "updated_channels": d.updated_channels}
            metadata: Any = d.metadata
        else:
            checkpoint = {
                "v": d.v, "id": d.id, "ts": d.ts, "channel_values": values,
                "channel_versions": dict(d.channel_versions),
                "versions_seen": {k: dict(v) for k, v in d.versions_seen.items()},
                "updated_channels": (list(d.updated_channels)
                                     if d.updated_channels is not None else None),
            }
            metadata = _copy(d.metadata)
        if d.extra is not None:
            checkpoint.update(cast(Mapping[str, Any], self.value(d.extra)))
        tid = index.thread_id
        return CheckpointTuple(
            config=config_of(tid, d.ns, d.id),
            checkpoint=cast(Checkpoint, checkpoint),
            metadata=cast(CheckpointMetadata, metadata),
            parent_config=config_of(tid, d.ns, d.parent_id) if d.parent_id else None,
            pending_writes=self.pending(writes),
        )
