"""dsh-session plugin ``todo``: the agent's todo list: the todo/write event, its validation
and the current-list read.

Each ``todo/write`` carries the whole list; the latest one is the current list::

    from dsh_session_todo import current_todos, todo_write

    outcome = todo_write(session, [{"content": "plan", "status": "in_progress"}])
    outcome.text                     # 'Updated todo list: 0 pending, 1 in progress, ...'
    current_todos(session.events)    # (TodoItem(content='plan', status='in_progress'),)
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (and so
# every store and CLI command) does not pay for what it does not use.
if _typing.TYPE_CHECKING:
    from ._todos import (
        TodoCallCard,
        ToolOutcome,
        current_todos,
        present_todo_call,
        todo_write,
        validate_todos,
    )
    from .errors import TodoSnapshotError, TodoValidationError
    from .events import TodoItem, TodoStatus, TodoWrite, TodoWriteData

_LAZY: dict[str, str] = {
    "TodoCallCard": "._todos",
    "TodoItem": ".events",
    "TodoSnapshotError": ".errors",
    "TodoStatus": ".events",
    "TodoValidationError": ".errors",
    "TodoWrite": ".events",
    "TodoWriteData": ".events",
    "ToolOutcome": "._todos",
    "current_todos": "._todos",
    "present_todo_call": "._todos",
    "todo_write": "._todos",
    "validate_todos": "._todos",
}

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


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-todo")
