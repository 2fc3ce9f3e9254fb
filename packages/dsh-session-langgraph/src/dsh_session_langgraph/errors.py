"""The errors of ``dsh-session-langgraph``, under core's :class:`DshSessionError` root::

    DshSessionError
    └── CheckpointWriteError (ValueError)    a put or put_writes the thread refuses
        ├── UnknownCheckpointError           its checkpoint was deleted (a late write to
        │                                    a deleted thread or a pruned checkpoint)
        └── CheckpointConflictError          another writer moved the namespace on first

Each is raised before anything is written: the thread's log is left as it was.
"""

from __future__ import annotations

__all__ = ["CheckpointConflictError", "CheckpointWriteError", "UnknownCheckpointError"]

from dsh_session_core.errors import DshSessionError


class CheckpointWriteError(DshSessionError, ValueError):
    """A write the thread refuses; nothing of it was stored.

    :ivar thread_id: the thread (the dsh session id).
    :ivar checkpoint_ns: the checkpoint namespace.
    :ivar checkpoint_id: the checkpoint the write names (a put's parent, or the
        checkpoint of put_writes).
    """

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str,
                 checkpoint_id: str | None) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id


class UnknownCheckpointError(CheckpointWriteError):
    """The checkpoint a write names was deleted from the thread (``delete_thread``,
    ``delete_for_runs``, ``prune``: the thread does not hold it, and its id says it
    was made before they ran). A late write to a deleted thread is refused this
    way, so it cannot bring the thread back."""


class CheckpointConflictError(CheckpointWriteError):
    """Another writer (another process, another saver) stored a checkpoint in this
    namespace since this saver last read the thread, and this put does not continue
    it: two writers forking one chain cannot both win. Read the thread again
    (``get_tuple``) and continue from its latest checkpoint.

    :ivar latest_id: the namespace's latest checkpoint, the other writer's.
    """

    def __init__(self, message: str, *, thread_id: str, checkpoint_ns: str,
                 checkpoint_id: str | None, latest_id: str) -> None:
        super().__init__(message, thread_id=thread_id, checkpoint_ns=checkpoint_ns,
                         checkpoint_id=checkpoint_id)
        self.latest_id = latest_id
