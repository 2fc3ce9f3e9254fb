"""dsh-session plugin ``todo``: the agent's todo list: the todo/write event, its validation
and the current-list read.

Each ``todo/write`` carries the whole list; the latest one is the current list::

    from dsh_session_todo import current_todos, todo_write

    outcome = todo_write(session, [{"content": "plan", "status": "in_progress"}])
    outcome.text                     # 'Updated todo list: 0 pending, 1 in progress, ...'
    current_todos(session.events)    # (TodoItem(content='plan', status='in_progress'),)
"""

from __future__ import annotations

from ._errors import TodoSnapshotError, TodoValidationError
from ._todos import (
    TodoCallCard,
    ToolOutcome,
    current_todos,
    present_todo_call,
    todo_write,
    validate_todos,
)
from .events import TodoItem, TodoStatus, TodoWrite, TodoWriteData

__all__ = [
    "TodoCallCard",
    "TodoItem",
    "TodoSnapshotError",
    "TodoStatus",
    "TodoValidationError",
    "TodoWrite",
    "TodoWriteData",
    "ToolOutcome",
    "current_todos",
    "present_todo_call",
    "todo_write",
    "validate_todos",
]
