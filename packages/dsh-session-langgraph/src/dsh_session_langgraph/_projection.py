"""The ``langgraph/checkpoints`` projection: each thread's checkpoints and pending writes
as rows the store keeps beside its log, so that a saver that has not folded the log (a
fresh one, in a new process) reads a checkpoint by key, a namespace's newest first, and
a checkpoint's writes by prefix, paying for what it reads, not for the log's length.

The rows, by key (each part escaped by :func:`part`, so that ``/`` only separates):

- ``c/<ns>/<checkpoint id>``: a :class:`CheckpointRow`, the checkpoint as its
  ``langgraph/checkpoint`` event holds it (its own blobs, and ``sources``: where each
  value it does not hold is, by checkpoint id), less the message ids it recorded. A
  namespace's rows sort by id, as LangGraph's ids sort by time: its latest is the last.
- ``c/<ns>/<checkpoint id>/<task id>/<idx>``: a :class:`WriteRow`, one pending write,
  just after its checkpoint's row: a read of a checkpoint, or of a namespace's newest,
  reads its writes in the same key range (newest first, a checkpoint's writes come
  before it). A special channel's write (errors, interrupts) stored again replaces its
  row, as it replaces the write.
- ``n/<ns>``: a :class:`NamespaceRow`, one per namespace holding a checkpoint.

A value is found by following ids: the checkpoint's own blob, else the one of the
checkpoint its ``sources`` names, and for a delta the base in the blob its writer's
``sources`` names, to the full value. A rewrite (``delete_thread``, ``prune``,
``delete_for_runs``) writes a new log: its rows are folded from it alone, so
``langgraph/removed`` makes none (the horizon a late write is told by is the writer's,
which holds the log).

Keys hold ids and the graph's namespace and channel names (schema identifiers, shown in
the clear on an encrypted store as event types are), never a value or metadata
(docs/decisions.md).
"""

from __future__ import annotations

__all__ = ["CHECKPOINTS", "CheckpointRow", "NamespaceRow", "Row", "WriteRow",
           "checkpoint_key", "checkpoints_prefix", "part"]

import re
from collections.abc import Iterator
from typing import Final

import msgspec
from msgspec import Struct

from dsh_session_core import Event
from dsh_session_core.projections import Change, Projection, Put

from .events import LanggraphCheckpoint, LanggraphCheckpointData, LanggraphWrite, LanggraphWrites


class CheckpointRow(Struct, array_like=True, frozen=True, gc=False, tag="c"):
    """A checkpoint: its event's payload (its ``recorded`` left out)."""

    data: LanggraphCheckpointData


class WriteRow(Struct, array_like=True, frozen=True, gc=False, tag="w"):
    """One pending write of a task."""

    task_id: str
    task_path: str
    write: LanggraphWrite


class NamespaceRow(Struct, array_like=True, frozen=True, gc=False, tag="n"):
    """A namespace holding checkpoints (for ``list`` across namespaces)."""

    ns: str


class Row(Struct, array_like=True, frozen=True, gc=False):
    """A row of the projection: one of the kinds its key's first letter names."""

    item: CheckpointRow | WriteRow | NamespaceRow


#: What a key part must not hold as it is: the separator, the escape, and what a
#: backend cannot store (control characters, lone surrogates).
_UNSAFE: Final = re.compile(r"[%/\x00-\x1f\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"%{code:02X}" if code < 0x100 else f"%u{code:04X}"


def part(text: str) -> str:
    """``text`` as a part of a key: ``%``, ``/``, control characters and lone surrogates
    percent-escaped (other characters, and so the order of ids, are kept)."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def checkpoints_prefix(ns: str) -> str:
    """The prefix of the checkpoint rows of namespace ``ns``."""
    return f"c/{part(ns)}/"


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    return f"c/{part(ns)}/{part(checkpoint_id)}"


def _fold(event: Event) -> Iterator[Change]:
    cls = event.__class__
    if cls is LanggraphCheckpoint:
        d: LanggraphCheckpointData = event.data
        if d.recorded:
            d = msgspec.structs.replace(d, recorded=[])
        yield Put(f"n/{part(d.ns)}", Row(NamespaceRow(d.ns)))
        yield Put(checkpoint_key(d.ns, d.id), Row(CheckpointRow(d)))
    elif cls is LanggraphWrites:
        w = event.data
        prefix = f"{checkpoint_key(w.ns, w.checkpoint_id)}/{part(w.task_id)}"
        for write in w.writes:
            yield Put(f"{prefix}/{write.idx}", Row(WriteRow(w.task_id, w.task_path, write)))


#: The projection (registered by the plugin's ``register_projections``).
CHECKPOINTS: Final = Projection(
    "langgraph/checkpoints", 1, frozenset({"langgraph/checkpoint", "langgraph/writes"}),
    Row, _fold, doc="LangGraph's checkpoints (with their own blobs) and pending writes, "
                    "by namespace and id")
