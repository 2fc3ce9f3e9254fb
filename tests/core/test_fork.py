"""Spec core.md §11 I: ``SessionStore.fork`` (§6.3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from helpers import (
    CALL,
    SS,
    TC,
    TE,
    TS,
    A,
    U,
    exact,
    messages,
    text,
    wires,
)

from dsh_session_core import Event, PluginManager, Session, SessionStore, hookimpl
from dsh_session_core.errors import SessionForkError


class Created:
    def __init__(self) -> None:
        self.created: list[Session] = []
        self.events: list[Event] = []

    @hookimpl
    def session_created(self, session: Session) -> None:
        self.created.append(session)

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.events.append(event)


@pytest.fixture
def created(pm: PluginManager) -> Created:
    c = Created()
    pm.register(c)
    return c


@pytest.fixture
def store(pm: PluginManager, created: Created) -> SessionStore:
    return SessionStore(pm, clock=lambda: 1234)


def one_turn(s: Session, prompt: str = "hello") -> None:
    TS(s, 1)
    U(s, prompt)
    TE(s, 1)


def fork_error(fn: Callable[[], Any], code: str, message: str) -> SessionForkError:
    with pytest.raises(SessionForkError, match=exact(message)) as info:
        fn()
    assert info.value.code == code
    assert str(info.value) == message
    return info.value


def test_i90_empty_parent_gives_an_empty_child(store: SessionStore) -> None:
    parent = store.create("empty-parent", cwd="/workspace")
    child = store.fork(parent, None, "empty-child")
    assert list(child.events) == []
    h = child.header
    assert h.id == "empty-child"
    assert h.cwd == "/workspace"
    assert h.parent_session == "empty-parent"
    assert h.seed_length == 0
    line = msgspec.json.decode(msgspec.json.encode(h))
    assert line["seedLength"] == 0
    assert store.get("empty-child") is child


def test_i91_child_starts_with_the_parent_log(store: SessionStore) -> None:
    """Deviation 5: events are immutable and shared, not cloned: the child's events equal
    the parent's, cannot be changed, and appends to one log never reach the other."""
    parent = store.create("parent", cwd="/srv/p")
    one_turn(parent)
    child = store.fork("parent", None, "child")
    assert wires(child) == wires(parent)
    assert [e.seq for e in child.events] == [0, 1, 2]
    user = child.events[1]
    with pytest.raises(AttributeError):
        user.data.content = ()
    with pytest.raises(TypeError):
        user.data.content[0] = {"type": "text", "text": "changed"}
    assert wires(parent)[1]["data"]["content"] == [{"type": "text", "text": "hello"}]
    U(child, "child only")
    assert len(child.events) == 4
    assert len(parent.events) == 3
    U(parent, "parent only")
    assert wires(child)[3]["data"]["content"] == [text("child only")]
    assert wires(parent)[3]["data"]["content"] == [text("parent only")]
    assert messages(child)[-1] == {"role": "user", "content": [text("child only")]}
    assert messages(parent)[-1] == {"role": "user", "content": [text("parent only")]}
    assert child.header.seed_length == 3
    assert child.header.cwd == "/srv/p"
    assert child.header.parent_session == "parent"


def test_i91_child_created_at_is_now(pm: PluginManager) -> None:
    store = SessionStore(pm, clock=lambda: 1234)
    parent = store.create("parent", created_at=5)
    child = store.fork(parent, None, "child")
    assert parent.header.created_at == 5
    assert child.header.created_at == 1234


def test_i91_no_cwd_is_inherited_when_the_parent_has_none(store: SessionStore) -> None:
    parent = store.create("parent")
    one_turn(parent)
    child = store.fork(parent, None, "child")
    assert child.header.cwd is msgspec.UNSET
    line = msgspec.json.decode(msgspec.json.encode(child.header))
    assert "cwd" not in line


def test_i92_fork_at_an_earlier_turn_end(store: SessionStore) -> None:
    parent = store.create("parent")
    one_turn(parent, "first")  # 0..2, seq 2 is the first turn/end
    TS(parent, 2)
    U(parent, "second")
    TE(parent, 2)  # 3..5
    TS(parent, 3)
    U(parent, "open 3")  # 6..7, open
    child = store.fork(parent, 2, "c")
    assert [e.seq for e in child.events] == [0, 1, 2]
    assert wires(child) == wires(parent)[:3]
    assert child.header.seed_length == 3
    assert messages(child) == [{"role": "user", "content": [{"type": "text", "text": "first"}]}]
    assert len(parent.events) == 8


REASONS: list[dict[str, Any]] = [
    {"kind": "completed"},
    {"kind": "aborted", "reason": "cancelled by user"},
    {"kind": "error", "step": 1, "message": "model failed", "code": "MODEL"},
    {"kind": "disposed"},
    {"kind": "max-tokens"},
    {"kind": "interrupted"},
]


@pytest.mark.parametrize("reason", REASONS, ids=[r["kind"] for r in REASONS])
def test_i93_every_turn_end_reason_is_a_boundary(
    store: SessionStore, reason: dict[str, Any]
) -> None:
    parent = store.create("parent")
    TS(parent, 1)
    U(parent, "q")
    TE(parent, 1, reason)
    child = store.fork(parent, 2, "child")
    assert child.events[-1].type == "turn/end"
    assert msgspec.json.decode(msgspec.json.encode(child.events[-1]))["data"]["reason"] == reason
    # And with the default boundary (the last event).
    other = store.fork(parent, None, "child-2")
    assert other.events[-1].type == "turn/end"
    assert other.header.seed_length == 3


def test_i93_plugin_defined_reason_is_a_boundary(pm: PluginManager) -> None:
    """Any turn-end reason is accepted, a kind no schema knows included (opaque event):
    on a lenient store (the strict default refuses an unregistered reason)."""
    store = SessionStore(pm, clock=lambda: 1234, strict=False)
    parent = store.create("parent")
    TS(parent, 1)
    parent.append("turn/end", {"turn": 1, "reason": {"kind": "plugin-stopped", "why": "x"}})
    child = store.fork(parent, 1, "child")
    assert child.events[-1].type == "turn/end"
    assert wires(child) == wires(parent)


def test_i94_explicit_zero_on_an_empty_source(store: SessionStore, created: Created) -> None:
    src = store.create("empty")
    fork_error(
        lambda: store.fork(src, 0, "child"),
        "INVALID_BOUNDARY",
        'fork boundary 0 does not exist in session "empty" (last seq: none)',
    )
    assert store.get("child") is None
    assert [s.id for s in store.live()] == ["empty"]
    assert created.created == [src]


@pytest.mark.parametrize(
    ("boundary", "shown"),
    [(-1, "-1"), (0.5, "0.5"), (9007199254740992, "9007199254740992"), (float("nan"), "NaN")],
    ids=["minus-one", "half", "unsafe", "nan"],
)
def test_i95_boundary_must_be_a_safe_index(store: SessionStore, boundary: Any, shown: str) -> None:
    src = store.create("parent")
    one_turn(src)
    fork_error(
        lambda: store.fork(src, boundary, "child"),
        "INVALID_BOUNDARY",
        f'fork boundary for session "parent" must be a non-negative safe integer, got {shown}',
    )
    assert store.get("child") is None


def test_i95_boundary_past_the_end(store: SessionStore) -> None:
    src = store.create("parent")
    one_turn(src)
    fork_error(
        lambda: store.fork(src, 3, "child"),
        "INVALID_BOUNDARY",
        'fork boundary 3 does not exist in session "parent" (last seq: 2)',
    )
    assert store.get("child") is None


def test_i96_corrupt_live_log(store: SessionStore) -> None:
    """The public API cannot corrupt a log (events are immutable, ``events`` is a
    read-only view), so the corruption goes through the private list."""
    src = store.create("corrupt-parent")
    one_turn(src)
    log: list[Event] = src._events  # private on purpose
    log[2] = msgspec.structs.replace(log[2], seq=99)
    fork_error(
        lambda: store.fork(src, 2, "corrupt-child"),
        "INVALID_BOUNDARY",
        'fork boundary 2 does not match a contiguous event seq in session "corrupt-parent"',
    )
    assert store.get("corrupt-child") is None


def test_i97_source_not_found(store: SessionStore) -> None:
    fork_error(lambda: store.fork("missing"), "SESSION_NOT_FOUND", 'session "missing" not found')
    fork_error(
        lambda: store.fork(Session("detached")),
        "SESSION_NOT_FOUND",
        'session "detached" not found',
    )
    store.create("same-id")
    fork_error(
        lambda: store.fork(Session("same-id")),
        "SESSION_NOT_LIVE",
        'session "same-id" is not the live store instance',
    )
    assert [s.id for s in store.live()] == ["same-id"]


def test_i97_detached_session_is_not_found(store: SessionStore) -> None:
    s = store.create("gone")
    one_turn(s)
    store.detach(s)
    fork_error(lambda: store.fork(s), "SESSION_NOT_FOUND", 'session "gone" not found')


def _open_at(s: Session, type_: str) -> None:
    TS(s, 1)
    match type_:
        case "turn/start":
            pass
        case "step/start":
            SS(s, 1, 1)
        case "user/message":
            U(s, "q")
        case "assistant/message":
            SS(s, 1, 1)
            A(s, 1, 1, [text("a"), CALL("c1")])
        case _:
            SS(s, 1, 1)
            A(s, 1, 1, [CALL("c1")])
            TC(s, 1, 1, "c1")


@pytest.mark.parametrize(
    "type_", ["turn/start", "step/start", "user/message", "assistant/message", "tool/call"]
)
def test_i98_boundary_must_be_a_turn_end(store: SessionStore, type_: str) -> None:
    name = f"open-{type_}"
    src = store.create(name)
    one_turn(src)
    _open_at(src, type_)
    last = src.events[-1]
    assert last.type == type_
    b = last.seq
    message = f'fork boundary {b} in session "{name}" must be turn/end, got {type_}'
    fork_error(lambda: store.fork(src, b, "child"), "OPEN_TURN", message)
    # The default boundary is the last event: an open tail is never clipped.
    fork_error(lambda: store.fork(src, None, "child"), "OPEN_TURN", message)
    assert store.get("child") is None


def test_i99_child_id_check_comes_first(store: SessionStore) -> None:
    src = store.create("src")
    TS(src, 1)  # open turn
    store.create("child")
    msg = 'session "child" already exists'
    fork_error(lambda: store.fork(src, None, "child"), "SESSION_ALREADY_EXISTS", msg)
    fork_error(lambda: store.fork(src, -1, "child"), "SESSION_ALREADY_EXISTS", msg)
    fork_error(lambda: store.fork("missing", None, "child"), "SESSION_ALREADY_EXISTS", msg)


def test_i100_minted_child(store: SessionStore, created: Created) -> None:
    src = store.create("src")
    one_turn(src, "q")
    child = store.fork(src)
    assert child.id == "session-1"
    assert child.header.parent_session == "src"
    assert child.header.seed_length == 3
    assert created.created == [src, child]
    assert store.live() == [src, child]
    assert messages(child) == [{"role": "user", "content": [text("q")]}]


def test_i100_minting_shares_the_store_counter(store: SessionStore) -> None:
    store.create()  # session-1
    src = store.create("src")
    one_turn(src)
    assert store.fork(src).id == "session-2"
    assert store.create().id == "session-3"


def test_i_fork_emits_no_session_event_for_the_seed(store: SessionStore, created: Created) -> None:
    src = store.create("src")
    one_turn(src)
    n = len(created.events)
    child = store.fork(src, None, "child")
    assert len(created.events) == n
    ev = U(child, "more")
    assert created.events[-1] is ev


def test_i_fork_child_is_owned_by_the_calling_scope(store: SessionStore) -> None:
    src = store.create("src")
    one_turn(src)
    with store.scope():
        child = store.fork(src, None, "child")
        assert store.get("child") is child
    assert store.get("child") is None
    assert store.get("src") is src
