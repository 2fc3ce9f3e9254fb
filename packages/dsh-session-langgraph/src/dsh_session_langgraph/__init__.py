"""A LangGraph checkpointer on dsh-session: :class:`DshCheckpointSaver`, a
``langgraph.checkpoint.base.BaseCheckpointSaver`` whose threads are dsh-session logs::

    from dsh_session_langgraph import DshCheckpointSaver

    saver = DshCheckpointSaver("sqlite:///graph.db")   # or a folder, postgresql://...
    graph = builder.compile(checkpointer=saver)

The ``langgraph/*`` event types it writes are declared by this distribution's plugin
(entry point ``langgraph`` in the ``dsh_session.plugins`` group), which imports no part
of LangGraph.
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (every store and
# CLI command does) must not import LangGraph.
if _typing.TYPE_CHECKING:
    from ._saver import DshCheckpointSaver
    from .errors import CheckpointConflictError, CheckpointWriteError, UnknownCheckpointError
    from .events import (
        LanggraphCheckpoint,
        LanggraphCheckpointData,
        LanggraphRemoved,
        LanggraphRemovedData,
        LanggraphResume,
        LanggraphResumeData,
        LanggraphWrite,
        LanggraphWrites,
        LanggraphWritesData,
        TypedBlob,
    )

_LAZY: dict[str, str] = {
    "CheckpointConflictError": ".errors",
    "CheckpointWriteError": ".errors",
    "DshCheckpointSaver": "._saver",
    "LanggraphCheckpoint": ".events",
    "LanggraphCheckpointData": ".events",
    "LanggraphRemoved": ".events",
    "LanggraphRemovedData": ".events",
    "LanggraphResume": ".events",
    "LanggraphResumeData": ".events",
    "LanggraphWrite": ".events",
    "LanggraphWrites": ".events",
    "LanggraphWritesData": ".events",
    "TypedBlob": ".events",
    "UnknownCheckpointError": ".errors",
}

__all__ = [
    "CheckpointConflictError",
    "CheckpointWriteError",
    "DshCheckpointSaver",
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
    "UnknownCheckpointError",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-langgraph")
