"""Spec §6 and scenario 88: the ``todo/write`` event, ``validate_todos``, the
``todo_write`` tool and the current-list read."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsh_session_todo.plugin
from dsh_session_core import (
    OpaqueEvent,
    Session,
    SessionStore,
    create_plugin_manager,
    encode_event,
)
from dsh_session_core.vocabulary import TextBlock
from dsh_session_todo import (
    TodoItem,
    TodoSnapshotError,
    TodoStatus,
    TodoValidationError,
    TodoWrite,
    TodoWriteData,
    ToolOutcome,
    current_todos,
    present_todo_call,
    todo_write,
    validate_todos,
)

NON_EMPTY = "invalid todo: `content` must be a non-empty string"


def session() -> Session:
    pm = create_plugin_manager(autoload=False)
    pm.register(dsh_session_todo.plugin, name="todo")
    return SessionStore(pm).create()


def logged(s: Session) -> list[dict[str, Any]]:
    """The ``data`` of every logged event, as parsed log lines."""
    return [msgspec.json.decode(encode_event(e))["data"] for e in s.events]


def item(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


# --- scenario 88 -------------------------------------------------------------------------


def test_s88_write_two_items() -> None:
    s = session()
    out = todo_write(s, [item("plan", "in_progress"), item("build")])
    assert out == ToolOutcome("Updated todo list: 1 pending, 1 in progress, 0 completed.")
    assert out.is_error is False
    assert [e.type for e in s.events] == ["todo/write"]
    assert logged(s) == [{"todos": [{"content": "plan", "status": "in_progress"},
                                    {"content": "build", "status": "pending"}]}]
    assert type(s.events[0]) is TodoWrite


def test_s88_content_is_stored_trimmed() -> None:
    s = session()
    todo_write(s, [item("  plan the work  ")])
    assert logged(s) == [{"todos": [{"content": "plan the work", "status": "pending"}]}]


def test_s88_blank_content_is_an_error() -> None:
    s = session()
    out = todo_write(s, [item("   ")])
    assert out.is_error
    assert "non-empty" in out.text
    assert out.text == f"Error: {NON_EMPTY}"
    assert len(s.events) == 0


def test_s88_duplicate_content() -> None:
    s = session()
    out = todo_write(s, [item("dup"), item("dup", "completed")])
    assert out == ToolOutcome('Error: invalid todos: duplicate content "dup"', is_error=True)
    assert len(s.events) == 0


def test_s88_two_in_progress() -> None:
    s = session()
    out = todo_write(s, [item("a", "in_progress"), item("b", "in_progress")])
    assert out == ToolOutcome(
        "Error: invalid todos: at most one task may be in_progress, got 2", is_error=True)
    assert len(s.events) == 0


def test_s88_an_unknown_status_fails_before_the_tool_runs() -> None:
    s = session()
    out = todo_write(s, [item("a", "doing")])
    assert out.is_error
    assert out.text.startswith("Error: invalid todo_write arguments: ")
    assert "doing" in out.text
    assert "$.todos[0].status" in out.text
    assert len(s.events) == 0
    # "Before execute": even an agent-less call reports the argument, not the agent.
    assert todo_write(None, [item("a", "doing")]) == out


def test_s88_no_agent() -> None:
    out = todo_write(None, [item("a")])
    assert out == ToolOutcome("Error: todo_write requires an owning agent session", True)


def test_s88_the_last_write_holds_the_second_list() -> None:
    s = session()
    todo_write(s, [item("first")])
    todo_write(s, [item("second", "completed"), item("third")])
    assert [e.type for e in s.events] == ["todo/write", "todo/write"]
    assert logged(s)[-1] == {"todos": [{"content": "second", "status": "completed"},
                                       {"content": "third", "status": "pending"}]}
    assert current_todos(s.events) == (TodoItem(content="second", status="completed"),
                                       TodoItem(content="third", status="pending"))


# --- the rest of §6 ----------------------------------------------------------------------


def test_an_empty_list_is_valid() -> None:
    s = session()
    assert todo_write(s, []) == ToolOutcome(
        "Updated todo list: 0 pending, 0 in progress, 0 completed.")
    assert logged(s) == [{"todos": []}]
    assert current_todos(s.events) == ()


def test_counts() -> None:
    s = session()
    out = todo_write(s, [item("a", "completed"), item("b"), item("c", "completed"),
                         item("d", "in_progress"), item("e")])
    assert out.text == "Updated todo list: 2 pending, 1 in progress, 2 completed."


def test_validation_precedes_the_agent_check() -> None:
    assert todo_write(None, [item(" ")]).text == f"Error: {NON_EMPTY}"
    assert todo_write(None, [item("x"), item("x ")]).text == (
        'Error: invalid todos: duplicate content "x"')


def test_duplicates_are_found_after_trimming_and_quoted_as_json() -> None:
    with pytest.raises(TodoValidationError, match=re.escape('duplicate content "a"')):
        validate_todos([item("a"), item(" a\t")])
    message = 'invalid todos: duplicate content "say \\"hi\\"\\n\\u0001é"'
    with pytest.raises(TodoValidationError, match=f"^{re.escape(message)}$"):
        validate_todos([item('say "hi"\n\x01é'), item('say "hi"\n\x01é')])


def test_the_blank_check_comes_before_the_duplicate_check_item_by_item() -> None:
    with pytest.raises(TodoValidationError, match="duplicate"):
        validate_todos([item("a"), item("a"), item(" ")])
    with pytest.raises(TodoValidationError, match="non-empty"):
        validate_todos([item(" "), item("a"), item("a")])


def test_the_in_progress_rule_comes_after_the_items() -> None:
    with pytest.raises(TodoValidationError, match="duplicate"):
        validate_todos([item("a", "in_progress"), item("b", "in_progress"), item("a")])


def test_trimming_follows_javascript() -> None:
    # String.prototype.trim strips U+FEFF and U+2028 but not U+001C or U+0085.
    assert validate_todos([item("\ufeff\u2028x\u3000")]) == (TodoItem(content="x",
                                                                       status="pending"),)
    assert validate_todos([item("\x1cx\x85")])[0].content == "\x1cx\x85"
    with pytest.raises(TodoValidationError, match="non-empty"):
        validate_todos([item("\ufeff \u00a0")])


@pytest.mark.parametrize("todos", [
    "not a list",
    {"content": "a", "status": "pending"},
    [5],
    [{"content": 1, "status": "pending"}],
    [{"status": "pending"}],
    [{"content": "a"}],
    [{"content": "a", "status": "pending", "extra": 1}],
    [TodoItem(content="a", status="doing")],  # type: ignore[arg-type]
    [object()],
])
def test_arguments_of_the_wrong_shape(todos: Any) -> None:
    with pytest.raises(TodoValidationError, match=r"^invalid todo_write arguments: "):
        validate_todos(todos)
    out = todo_write(session(), todos)
    assert out.is_error
    assert out.text.startswith("Error: invalid todo_write arguments: ")


def test_items_may_be_typed() -> None:
    typed = [TodoItem(content=" a ", status="completed")]
    assert validate_todos(typed) == (TodoItem(content="a", status="completed"),)


def test_the_event_is_log_only_and_not_validated_when_appended() -> None:
    s = session()
    ev = s.append("todo/write", {"todos": [item(" "), item(" ")]})  # the tool would refuse
    assert type(ev) is TodoWrite
    assert ev.data == TodoWriteData(todos=(TodoItem(content=" ", status="pending"),) * 2)
    assert ev.surface is False
    assert s.derive_messages() == []
    assert current_todos(s.events) == ev.data.todos


def test_current_todos_with_no_write_is_none() -> None:
    s = session()
    assert current_todos(s.events) is None
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                   "source": {"kind": "user"}}})
    assert current_todos(s.events) is None


def test_without_the_plugin_the_event_is_untyped_but_still_read() -> None:
    s = SessionStore(create_plugin_manager(autoload=False), strict=False).create()
    assert todo_write(s, [item(" a ", "in_progress")]).is_error is False
    assert type(s.events[0]) is OpaqueEvent
    assert current_todos(s.events) == (TodoItem(content="a", status="in_progress"),)


def test_a_latest_write_outside_the_schema_is_reported() -> None:
    s = SessionStore(create_plugin_manager(autoload=False), strict=False).create()
    todo_write(s, [item("a")])
    s.append("todo/write", {"todos": [item("b", "doing")]})
    with pytest.raises(TodoSnapshotError, match=r"^todo/write at seq 1 ") as info:
        current_todos(s.events)
    assert info.value.seq == 1


def test_outcome_content_and_call_card() -> None:
    assert ToolOutcome("hi").content == (TextBlock(text="hi"),)
    assert ToolOutcome.error("x") == ToolOutcome("Error: x", is_error=True)
    todos = [item("a")]
    assert present_todo_call(todos) == {"card": "generic", "title": "Update todo list",
                                        "kind": "other", "rawInput": todos}


# --- property: exactly lists of unique non-blank contents with at most one in progress -----

_status: st.SearchStrategy[TodoStatus] = st.sampled_from(["pending", "in_progress",
                                                          "completed"])
_content = st.text(alphabet=" \tab\u00a0\ufeff", max_size=4)


@given(st.lists(st.tuples(_content, _status), max_size=6))
def test_validate_accepts_exactly_the_valid_lists(pairs: list[tuple[str, TodoStatus]]) -> None:
    js_space = " \t\u00a0\ufeff"
    trimmed = [c.strip(js_space) for c, _ in pairs]
    valid = (
        all(trimmed)
        and len(set(trimmed)) == len(trimmed)
        and sum(status == "in_progress" for _, status in pairs) <= 1
    )
    todos = [item(c, s) for c, s in pairs]
    if valid:
        assert validate_todos(todos) == tuple(
            TodoItem(content=t, status=s) for t, (_, s) in zip(trimmed, pairs, strict=True))
    else:
        with pytest.raises(TodoValidationError):
            validate_todos(todos)
