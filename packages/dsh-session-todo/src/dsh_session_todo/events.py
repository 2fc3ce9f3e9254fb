"""The ``todo/write`` event: the agent's whole todo list, as a snapshot.

The event is not validated beyond its shape when it is logged (the reference validates
only in the ``todo_write`` tool), so a logged item's content may be blank or untrimmed and
a list may repeat itself; :func:`~dsh_session_todo.validate_todos` holds the tool's rules.
"""

from __future__ import annotations

__all__ = ["TodoItem", "TodoStatus", "TodoWrite", "TodoWriteData"]

from typing import Literal, TypeAlias

from msgspec import Struct

from dsh_session_core import Event

#: Where a task stands.
TodoStatus: TypeAlias = Literal["pending", "in_progress", "completed"]


class TodoItem(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """One task of the list (keys in the reference's order: content, status).

    :ivar content: what the task is.
    :ivar status: ``pending``, ``in_progress`` or ``completed``.
    """

    content: str
    status: TodoStatus


class TodoWriteData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``todo/write``: the whole list, ``{"todos": [...]}``."""

    todos: tuple[TodoItem, ...]


class TodoWrite(Event, tag="todo/write", frozen=True):
    """The agent's whole todo list, carried as a full snapshot and replaced wholesale on
    each write — the current list is the most recent `todo/write` (last-write-wins on
    replay, no fold). Appended by an owning agent via `todo_write(session, todos)`.

    (The first paragraph is the reference catalog's doc line, with the Python call for
    the reference's TypeScript one.) NOT a
    surface type: it produces no LLM message, carries no ``surfaceOp`` and stays off the
    surface; it is durable, replayable UI state, distinct from the conversation history.
    """

    data: TodoWriteData
