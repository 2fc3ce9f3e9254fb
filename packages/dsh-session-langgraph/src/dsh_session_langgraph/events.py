"""The ``langgraph`` plugin's log-only event types: LangGraph checkpoints and pending
writes, kept losslessly.

A LangGraph thread is one dsh session (its id is the thread id). Each ``put`` is a
``langgraph/checkpoint`` holding the checkpoint without its channel values, its
metadata, and the serialized value of each channel that ``new_versions`` names (a blob
is written once, at the version that made it); each ``put_writes`` is a
``langgraph/writes`` holding the task's new writes. ``delete_thread``, ``prune`` and
``delete_for_runs`` rewrite the log without what they delete, and start it with
``langgraph/removed``: the rewrite's moment as a checkpoint id, so that a late write
naming a checkpoint made before it is refused (a deleted thread is left holding only that event).
Values are what the saver's serializer gives (``serde.dumps_typed``): its type tag and
its bytes, in base64. A list channel whose new value extends its previous one (the
``messages`` list under ``add_messages``) is stored as the elements it adds to an earlier
value of the channel and that value's version (``TypedBlob.base``). A checkpoint names
the checkpoints whose blobs hold its other values (``sources``), so that the
``langgraph/checkpoints`` projection's readers follow ids.
"""

from __future__ import annotations

__all__ = [
    "LanggraphCheckpoint",
    "LanggraphCheckpointData",
    "LanggraphRemoved",
    "LanggraphRemovedData",
    "LanggraphResume",
    "LanggraphResumeData",
    "LanggraphWrite",
    "LanggraphWrites",
    "LanggraphWritesData",
    "TypedBlob",
]

from msgspec import Struct

from dsh_session_core import Event, JsonValue

#: A channel version as LangGraph makes them (``get_next_version``): int, float or str.
Version = int | float | str


class _Payload(Struct, frozen=True, kw_only=True, rename="camel", gc=False,
               forbid_unknown_fields=True, omit_defaults=True):
    pass


class TypedBlob(_Payload, kw_only=True, frozen=True):
    """One serialized value: the serializer's type tag (``msgpack``, ``json``, ``bytes``,
    ``null``...) and its bytes in base64; ``version`` when it is a channel's value.

    ``base``, when set, makes the blob a delta: the channel's value at ``version`` is
    a list, the list the same channel (of the same namespace) held at version ``base``
    followed by the elements serialized here (a list of them). The base is found as a
    value is, by (namespace, channel, version), in the ancestry of the checkpoint that
    wrote the delta, and may be a delta in turn; a full value ends each chain.
    ``position`` is a delta's place in its chain (the full value's is 0), by which the
    saver chooses the base of the chain's next deltas."""

    type: str
    data: str
    version: Version | None = None
    base: Version | None = None
    position: int = 0


class LanggraphCheckpointData(_Payload, kw_only=True, frozen=True):
    """A checkpoint of namespace ``ns``: its id, its parent's (``None`` at a chain's
    root), the checkpoint's own fields, its metadata (JSON, as the saver filters on it)
    and the blobs of the channels this checkpoint wrote (by channel name). ``extra``
    holds any other key of the checkpoint (serialized), should LangGraph add one;
    ``recorded`` the ids of the LangChain messages of its ``messages`` channel that
    the core message events after it record (those not recorded before).

    ``sources`` says where a reader finds what is not in ``blobs``, by channel: for a
    channel holding a value this checkpoint does not write, the checkpoint whose blob
    holds it; for a delta it writes, the checkpoint whose blob holds the delta's base.
    (LangGraph's integer versions repeat across the branches of a fork: a version alone
    does not name a blob.) So a checkpoint's value is read by following ids, never by
    walking its ancestry (the ``langgraph/checkpoints`` projection's readers do). A
    log written before it existed holds ``None``: its readers fold the log."""

    ns: str
    id: str
    parent_id: str | None = None
    v: int
    ts: str
    channel_versions: dict[str, Version]
    versions_seen: dict[str, dict[str, Version]]
    updated_channels: list[str] | None = None
    metadata: dict[str, JsonValue]
    blobs: dict[str, TypedBlob]
    extra: TypedBlob | None = None
    recorded: list[str] = []
    sources: dict[str, str] | None = None


class LanggraphCheckpoint(Event, tag="langgraph/checkpoint", frozen=True):
    """LangGraph stored a checkpoint (``put``). Log-only: the messages of its
    ``messages`` channel are recorded by the core message events that follow it."""

    data: LanggraphCheckpointData


class LanggraphWrite(_Payload, kw_only=True, frozen=True):
    """One pending write: its index in the task's writes (negative for the special
    channels, as ``WRITES_IDX_MAP`` numbers them), its channel and its value."""

    idx: int
    channel: str
    value: TypedBlob


class LanggraphWritesData(_Payload, kw_only=True, frozen=True):
    """The writes a task made against checkpoint ``checkpointId`` of namespace ``ns``."""

    ns: str
    checkpoint_id: str
    task_id: str
    task_path: str = ""
    writes: list[LanggraphWrite]


class LanggraphWrites(Event, tag="langgraph/writes", frozen=True):
    """LangGraph stored a task's pending writes (``put_writes``). Log-only."""

    data: LanggraphWritesData


class LanggraphRemovedData(_Payload, kw_only=True, frozen=True):
    """What a rewrite removed: how many checkpoints, by which operation
    (``delete_thread``, ``prune``, ``delete_for_runs``), and the thread's horizon
    ``through``: the rewrite's moment as a LangGraph id (they sort by time; newer than
    every id removed). A write naming an id at or before it that the thread does not
    hold is a late write, refused."""

    through: str
    checkpoints: int
    reason: str
    #: True on the marker a rewrite appends to the old log under the thread's writer
    #: lock before it deletes it: the saver's writers (in any process) wait until the
    #: new log replaces it, so no write lands in a log about to be deleted; a marker
    #: older than a writer's lock timeout is a rewriter that died before its delete
    #: (the log is whole): the writer waits no longer and writes.
    pending: bool = False


class LanggraphRemoved(Event, tag="langgraph/removed", frozen=True):
    """The thread's log was rewritten without some of its checkpoints (or all of them:
    a deleted thread holds only this event). Log-only."""

    data: LanggraphRemovedData


class LanggraphResumeData(_Payload, kw_only=True, frozen=True):
    """The value a ``Command(resume=...)`` gave a paused run (its text: a string as it
    is, another value as JSON; first, so that a line of ``show`` holds it), and the
    checkpoint it resumed."""

    value: str
    checkpoint_id: str


class LanggraphResume(Event, tag="langgraph/resume", frozen=True):
    """A run resumed with a value (``Command(resume=...)``): the input of its turn,
    after the ``langgraph/writes`` that stores it. Log-only."""

    data: LanggraphResumeData
