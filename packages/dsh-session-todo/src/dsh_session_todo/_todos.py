"""The ``todo_write`` tool and the current-list read.

There is no tool registry here, so the tool is :func:`todo_write`, a function a harness
calls with the model's ``todos`` argument. Its result is a :class:`ToolOutcome`: the text
and error flag of the ``tool/result`` to log, rendered as the reference's registry renders
a tool's return value or exception (``Error: <message>``).
"""

from __future__ import annotations

__all__ = [
    "TodoCallCard",
    "ToolOutcome",
    "current_todos",
    "present_todo_call",
    "todo_write",
    "validate_todos",
]

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

import msgspec

from dsh_session_core import Event, OpaqueEvent, Session, ToolOutcome, to_wire
from dsh_session_core.jscompat import js_trim, json_quote

from .errors import TodoSnapshotError, TodoValidationError
from .events import TodoItem, TodoWrite, TodoWriteData


def _parse(todos: object) -> tuple[TodoItem, ...]:
    """The argument's shape, as a tool registry checks it against the tool's schema before
    the tool runs: an array of ``{content: str, status: <one of three>}`` objects."""
    try:
        # Through builtins first: a Struct passed in is not re-validated by convert (and
        # a Struct's constructor validates nothing).
        return msgspec.convert(msgspec.to_builtins({"todos": todos}), TodoWriteData).todos
    except (msgspec.ValidationError, TypeError) as exc:
        msg = f"invalid todo_write arguments: {exc}"
        raise TodoValidationError(msg) from None


def validate_todos(todos: Sequence[TodoItem | Mapping[str, Any]]) -> tuple[TodoItem, ...]:
    """Check a list against the ``todo_write`` rules and return it with trimmed content.

    :param todos: the items, as :class:`TodoItem` or in their wire shape
        (``{"content": ..., "status": ...}``).
    :returns: the items with ``content`` trimmed (JavaScript's ``trim()``), in order. An
        empty list is valid.
    :raises TodoValidationError: the list is not an array of well-formed items (a
        registry's schema check); or, with the reference's messages, an item's content is
        blank (``invalid todo: `content` must be a non-empty string``), repeats an
        earlier one after trimming (``invalid todos: duplicate content "<content>"``), or
        more than one item is in progress (``invalid todos: at most one task may be
        in_progress, got <n>``).
    """
    items = _parse(todos)
    seen: set[str] = set()
    trimmed: list[TodoItem] = []
    for item in items:
        content = js_trim(item.content)
        if not content:
            msg = "invalid todo: `content` must be a non-empty string"
            raise TodoValidationError(msg)
        if content in seen:
            msg = f"invalid todos: duplicate content {json_quote(content)}"
            raise TodoValidationError(msg)
        seen.add(content)
        trimmed.append(TodoItem(content=content, status=item.status))
    in_progress = sum(1 for item in trimmed if item.status == "in_progress")
    if in_progress > 1:
        msg = f"invalid todos: at most one task may be in_progress, got {in_progress}"
        raise TodoValidationError(msg)
    return tuple(trimmed)


def todo_write(session: Session | None, todos: Any) -> ToolOutcome:
    """Run the ``todo_write`` tool: validate the list, then log it as one ``todo/write``.

    The list is validated before the session is looked at, as in the reference, so a
    bad list is reported even to an agent-less caller.

    :param session: the calling agent's session, or ``None`` for an agent-less call.
    :param todos: the model's ``todos`` argument (any JSON value; checked here).
    :returns: ``Updated todo list: <p> pending, <i> in progress, <c> completed.``, or an
        error result (``Error: <message>``, see :func:`validate_todos`;
        ``Error: todo_write requires an owning agent session`` without a session), in
        which case nothing is logged.
    :raises Exception: what ``session.append`` raises (a listener's error, after the
        event was logged).
    """
    try:
        items = validate_todos(todos)
    except TodoValidationError as exc:
        return ToolOutcome.error(str(exc))
    if session is None:
        return ToolOutcome.error("todo_write requires an owning agent session")
    # The wire shape, not a TodoWriteData: a session whose registry lacks the todo
    # plugin keeps it as an opaque event when it lets the type through (strict=False, or
    # foreign_types=["todo/*"]); a strict one refuses it, naming the plugin to install.
    wire = [{"content": item.content, "status": item.status} for item in items]
    session.append("todo/write", {"todos": wire})
    counts = {"pending": 0, "in_progress": 0, "completed": 0}
    for item in items:
        counts[item.status] += 1
    return ToolOutcome(
        f"Updated todo list: {counts['pending']} pending, {counts['in_progress']} in "
        f"progress, {counts['completed']} completed."
    )


def current_todos(events: Sequence[Event]) -> tuple[TodoItem, ...] | None:
    """The current todo list: the latest ``todo/write`` in the log, as logged.

    :param events: the log, e.g. ``session.events``.
    :returns: its items (not re-validated: a log may hold what the tool would refuse),
        or ``None`` when the log holds no ``todo/write``.
    :raises TodoSnapshotError: the latest ``todo/write`` does not fit the schema (a
        foreign log); an earlier list is not a substitute for it.
    """
    for i in range(len(events) - 1, -1, -1):
        event = events[i]
        if type(event) is TodoWrite:
            return event.data.todos
        if type(event) is OpaqueEvent and event.type == "todo/write":
            # Untyped when the todo plugin is not in the session's registry.
            try:
                return msgspec.convert(to_wire(event)["data"], TodoWriteData).todos
            except msgspec.ValidationError as exc:
                msg = f"todo/write at seq {event.seq} does not fit the todo schema: {exc}"
                raise TodoSnapshotError(msg, seq=event.seq) from None
    return None


class TodoCallCard(TypedDict):
    """How a UI shows a ``todo_write`` call (``presentCall``)."""

    card: Literal["generic"]
    title: Literal["Update todo list"]
    kind: Literal["other"]
    rawInput: Any


def present_todo_call(todos: Any) -> TodoCallCard:
    """The call card: ``Update todo list``, with the raw ``todos`` argument as input."""
    return {"card": "generic", "title": "Update todo list", "kind": "other", "rawInput": todos}
