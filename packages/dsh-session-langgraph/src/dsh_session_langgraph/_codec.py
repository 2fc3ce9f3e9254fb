"""Between LangGraph's values and the plugin's payloads: a checkpoint, its metadata and
its new channel values into :class:`~.events.LanggraphCheckpointData`; a stored
checkpoint back into a ``CheckpointTuple``; a write's value into a
:class:`~.events.TypedBlob` and back. Values go through the saver's serializer
(``dumps_typed``/``loads_typed``), their bytes in base64 (a JSON log line holds text).
"""

from __future__ import annotations

__all__ = ["Codec"]

import base64
from collections.abc import Iterable, Mapping
from typing import Any, cast

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

from ._index import StoredWrite, ThreadIndex
from .events import LanggraphCheckpointData, TypedBlob

#: The checkpoint's keys that have fields of their own in the payload.
_FIELDS = frozenset({"v", "id", "ts", "channel_values", "channel_versions",
                     "versions_seen", "updated_channels"})


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
        return TypedBlob(type=kind, data=base64.b64encode(data).decode("ascii"),
                         version=version)

    def value(self, blob: TypedBlob) -> Any:
        return self.serde.loads_typed((blob.type, base64.b64decode(blob.data)))

    def checkpoint_data(self, ns: str, parent_id: str | None, checkpoint: Checkpoint,
                        metadata: CheckpointMetadata,
                        new_versions: ChannelVersions) -> LanggraphCheckpointData:
        """The payload of a ``put``: blobs for the channels of ``new_versions`` that hold
        a value (a channel emptied at a new version has none: it is not restored)."""
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        blobs = {ch: self.blob(values[ch], versions.get(ch, version))
                 for ch, version in new_versions.items() if ch in values}
        extra = {k: v for k, v in checkpoint.items() if k not in _FIELDS and v}
        return LanggraphCheckpointData(
            ns=ns, id=checkpoint["id"], parent_id=parent_id, v=checkpoint["v"],
            ts=checkpoint["ts"], channel_versions=dict(versions),
            versions_seen={k: dict(v) for k, v in checkpoint["versions_seen"].items()},
            updated_channels=checkpoint.get("updated_channels"),
            metadata=cast(dict[str, Any], dict(metadata)), blobs=blobs,
            extra=self.blob(extra) if extra else None)

    def channel_values(self, index: ThreadIndex, d: LanggraphCheckpointData
                       ) -> dict[str, Any]:
        """The values of ``d``'s channels, each from the blob of its version."""
        values: dict[str, Any] = {}
        blobs = index.blobs
        for channel, version in d.channel_versions.items():
            blob = blobs.get((d.ns, channel, version))
            if blob is not None and blob.type != "empty":
                values[channel] = self.value(blob)
        return values

    def pending(self, writes: Iterable[StoredWrite]) -> list[PendingWrite]:
        """The writes in ``writes_sort_key`` order, as ``(task_id, channel, value)``."""
        ordered = sorted(writes, key=lambda w: writes_sort_key(w[3], w[0], w[4]))
        return [(task, channel, self.value(value)) for task, channel, value, _, _ in ordered]

    def checkpoint_tuple(self, index: ThreadIndex, d: LanggraphCheckpointData,
                         writes: Iterable[StoredWrite]) -> CheckpointTuple:
        checkpoint: dict[str, Any] = {
            "v": d.v, "id": d.id, "ts": d.ts,
            "channel_values": self.channel_values(index, d),
            "channel_versions": dict(d.channel_versions),
            "versions_seen": {k: dict(v) for k, v in d.versions_seen.items()},
            "updated_channels": (list(d.updated_channels)
                                 if d.updated_channels is not None else None),
        }
        if d.extra is not None:
            checkpoint.update(cast(Mapping[str, Any], self.value(d.extra)))
        tid = index.thread_id
        return CheckpointTuple(
            config=config_of(tid, d.ns, d.id),
            checkpoint=cast(Checkpoint, checkpoint),
            metadata=cast(CheckpointMetadata, _copy(d.metadata)),
            parent_config=config_of(tid, d.ns, d.parent_id) if d.parent_id else None,
            pending_writes=self.pending(writes),
        )
