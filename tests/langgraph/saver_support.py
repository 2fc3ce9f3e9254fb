"""Helpers of the saver's tests: checkpoints made as LangGraph makes them (its own
``empty_checkpoint``: time-sorted ids), stored through the saver's ``put``, and the
stored log read back with a store of its own."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, empty_checkpoint

from dsh_session_core import Event, open_store
from dsh_session_langgraph import DshCheckpointSaver, LanggraphCheckpoint


def config(thread_id: str, ns: str = "", checkpoint_id: str | None = None
           ) -> RunnableConfig:
    c: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def checkpoint(values: dict[str, Any], versions: dict[str, int]) -> Checkpoint:
    """A new checkpoint holding ``values`` at ``versions``."""
    made = empty_checkpoint()
    made["channel_values"] = dict(values)
    made["channel_versions"] = dict(versions)
    return made


def put(saver: DshCheckpointSaver, thread_id: str, parent: str | None,
        made: Checkpoint, new: dict[str, int], ns: str = "", run_id: str = "") -> str:
    """Store ``made`` after ``parent``, ``new`` its new versions; its id."""
    metadata: CheckpointMetadata = {"source": "loop", "step": 0}
    if run_id:
        metadata["run_id"] = run_id
    saver.put(config(thread_id, ns, parent), made, metadata, dict[str, str | int | float](new))
    return made["id"]


def chain(saver: DshCheckpointSaver, thread_id: str, count: int, ns: str = "",
          parent: str | None = None) -> list[str]:
    """``count`` checkpoints in a chain, each writing channel ``n`` anew."""
    ids = []
    for i in range(count):
        parent = put(saver, thread_id, parent, checkpoint({"n": i}, {"n": i + 1}),
                     {"n": i + 1}, ns)
        ids.append(parent)
    return ids


def stored(url: str, thread_id: str) -> list[Event]:
    """The thread's stored log, read by a store of its own (``[]``: none)."""
    with open_store(url) as store:
        if not any(h.id == thread_id for h in store.stored()):
            return []
        return list(store.read_session(thread_id).events)


def checkpoint_events(url: str, thread_id: str) -> list[LanggraphCheckpoint]:
    return [e for e in stored(url, thread_id) if isinstance(e, LanggraphCheckpoint)]
