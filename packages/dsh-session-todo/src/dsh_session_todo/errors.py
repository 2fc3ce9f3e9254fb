"""The errors of the ``todo`` plugin, under core's :class:`DshSessionError` root::

    DshSessionError
    ├── TodoValidationError (ValueError)   a todo list breaks the todo_write rules
    └── TodoSnapshotError (ValueError)     the latest logged list does not fit its schema
"""

from __future__ import annotations

__all__ = ["TodoSnapshotError", "TodoValidationError"]

from dsh_session_core.errors import DshSessionError


class TodoValidationError(DshSessionError, ValueError):
    """A todo list the ``todo_write`` tool refuses; the message is the reference's."""


class TodoSnapshotError(DshSessionError, ValueError):
    """The latest ``todo/write`` in a log does not fit the schema (the event is not
    validated when logged, so a foreign log can hold one).

    :ivar seq: the seq of that event.
    """

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq
