"""Issue 37, point 5: what a store's ``create`` (and its other public methods) refuse up
front. Creating an id that is stored is :class:`SessionExistsError` (a
:class:`PersistenceError`, still a :class:`KeyError`), naming ``open`` and
``open_or_create``, whatever the cwd asked for, and nothing is changed; an argument of
the wrong type is a :class:`TypeError` naming what the method takes, before anything is
looked up, locked or written."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

from dsh_session_core import DurableStore, SessionStore, open_store
from dsh_session_core.errors import PersistenceError, SessionExistsError

#: Stores that outlive their store object (a memory: store is another store each time).
DURABLE = ("jsonl", "jsonl+zstd", "sqlite", "postgresql")


def _one_turn(store: DurableStore, sid: str, cwd: str | None = "/w") -> bytes:
    s = store.create(sid, cwd=cwd)
    with s.turn() as turn:
        turn.user("hello")
    store.release(s)
    return s.jsonl()


@pytest.mark.store_kinds(*DURABLE)
@pytest.mark.parametrize("cwd", ["/w", "/elsewhere", None])
def test_creating_a_stored_id_is_session_exists_naming_open(store_url: str,
                                                            cwd: str | None) -> None:
    with open_store(store_url) as store:
        written = _one_turn(store, "chat")
    with open_store(store_url) as store:
        with pytest.raises(SessionExistsError) as info:
            store.create("chat", cwd=cwd)
        error = info.value
        assert isinstance(error, PersistenceError)
        assert isinstance(error, KeyError)  # what it always was
        assert (error.session_id, error.stored) == ("chat", True)
        assert str(error) == (
            "session \"chat\" already exists in this store: resume it with "
            "store.open('chat'), or store.open_or_create('chat') to open it or create it; "
            "or choose another id")
        assert store.get("chat") is None  # nothing half made
        # The advice works, and the stored session is as it was.
        again = store.open("chat")
        assert again.jsonl() == written
        store.release(again)
        assert not store.open_or_create("chat").created


@pytest.mark.store_kinds(*DURABLE)
def test_a_seeded_create_that_does_not_match_the_stored_log_is_session_exists(
    store_url: str,
) -> None:
    with open_store(store_url) as store:
        _one_turn(store, "chat")
    other = SessionStore().create("other", cwd="/w")
    with other.turn() as turn:
        turn.user("something else")
    with open_store(store_url) as store, pytest.raises(SessionExistsError, match="open"):
        store.create("chat", cwd="/w", seed=other.events)


def test_a_live_id_keeps_the_reference_wording() -> None:
    store = SessionStore()
    store.create("x")
    with pytest.raises(SessionExistsError) as info:
        store.create("x")
    assert str(info.value) == 'session "x" already exists'
    assert not info.value.stored
    assert isinstance(info.value, PersistenceError)


_SESSION = re.escape("a Session (the object create or open returned)")


def _calls(store: DurableStore) -> list[tuple[Callable[[], Any], str]]:
    return [
        (lambda: store.create(123),  # type: ignore[arg-type]
         r"^store\.create\(\) takes the session id as a str \(or None, for a new id\); "
         r"got int \(123\)$"),
        (lambda: store.create("x", cwd=5),  # type: ignore[arg-type]
         r"^store\.create\(\) takes cwd as an absolute path, a str \(or None\); "
         r"got int \(5\)$"),
        (lambda: store.create("x", parent_session=b"p"),  # type: ignore[arg-type]
         r"takes parent_session as a session id, a str \(or None\); got bytes$"),
        (lambda: store.create("x", created_at="2024"),  # type: ignore[arg-type]
         r"takes created_at as epoch milliseconds"),
        (lambda: store.create("x", seed_length=True),
         r"takes seed_length as an int \(or None\); got bool \(True\)$"),
        (lambda: store.flush(None),  # type: ignore[arg-type]
         rf"^store\.flush\(\) takes the session as {_SESSION}; got NoneType \(None\)$"),
        (lambda: store.release("x"),  # type: ignore[arg-type]
         r"^store\.release\(\) takes the session as .*; got str \('x'\)$"),
        (lambda: store.discard(1),  # type: ignore[arg-type]
         r"^store\.discard\(\) takes the session as"),
        (lambda: store.open(1),  # type: ignore[arg-type]
         r"^store\.open\(\) takes the session id as a str; got int \(1\)$"),
        (lambda: store.open_or_create(None),  # type: ignore[arg-type]
         r"^store\.open_or_create\(\) takes the session id as a str; got NoneType"),
        (lambda: store.read_session(b"x"),  # type: ignore[arg-type]
         r"^store\.read_session\(\) takes the session id as a str; got bytes$"),
        (lambda: store.fork(3),  # type: ignore[arg-type]
         r"^store\.fork\(\) takes the session as a Session or its id \(a str\); got int"),
        (lambda: store.rekey(7),  # type: ignore[arg-type]
         r"^store\.rekey\(\) takes the session id as a str; got int \(7\)$"),
        (lambda: asyncio.run(store.aflush("x")),  # type: ignore[arg-type]
         r"^store\.aflush\(\) takes the session as"),
    ]


@pytest.mark.store_kinds("jsonl", "sqlite")
def test_a_wrong_type_is_a_type_error_naming_what_is_taken(store_url: str) -> None:
    with open_store(store_url) as store:
        for call, message in _calls(store):
            with pytest.raises(TypeError, match=message):
                call()
        assert store.live() == []
        assert store.stored() == []  # nothing was made


def test_the_in_memory_store_checks_the_same_types() -> None:
    store = SessionStore()
    with pytest.raises(TypeError, match=r"^store\.create\(\) takes the session id"):
        store.create(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^store\.create\(\) takes cwd as"):
        store.create("x", cwd=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^store\.flush\(\) takes the session as"):
        store.flush(None)  # type: ignore[arg-type]
    assert store.live() == []
