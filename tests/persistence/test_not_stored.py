"""``SessionNotStoredError``: every door of a store that looks a session up by its id
(``open``, ``read``, ``read_session``, ``tail``, ``read_lines``, ``location``,
``delete``, ``retain``, ``afollow``...) says "nothing is stored under this id" with one
type, on every kind of store (JSONL, compact JSONL, SQLite and PostgreSQL for real, and
memory): a ``PersistenceError`` (as it always was) and a ``LookupError``, carrying the
id and, where the raiser knows it, the store; its message the reference's, its note
what to do. Code tells it by its type, never by its message (tests/meta/test_error_kinds.py).
"""

from __future__ import annotations

import asyncio
import pickle
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from dsh_session_core import DurableStore, PersistenceError
from dsh_session_core.errors import DshSessionError, SessionNotStoredError
from lifecycle_support import Clock, opened, snapshot, write


async def _follow(store: DurableStore, session_id: str) -> None:
    async for _ in store.afollow(session_id):
        break


#: Each door of a store that looks a session up by its id, on an id nothing is stored
#: under; and whether the backend (which knows where it stores) raises it.
DOORS: dict[str, tuple[Callable[[DurableStore, str], Any], bool]] = {
    "open": (lambda store, sid: store.open(sid), False),
    "read": (lambda store, sid: store.read(sid), False),
    "read_session": (lambda store, sid: store.read_session(sid), False),
    "tail": (lambda store, sid: store.tail(sid, 3), False),
    "read_lines": (lambda store, sid: store.read_lines(sid, types=["user/message"]), False),
    "location": (lambda store, sid: store.location(sid), False),
    "retain": (lambda store, sid: store.retain(sid), False),
    "afollow": (lambda store, sid: asyncio.run(_follow(store, sid)), False),
    "delete": (lambda store, sid: store.delete(sid), True),
    "delete-dry-run": (lambda store, sid: store.delete(sid, dry_run=True), True),
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_an_id_nothing_is_stored_under_is_one_typed_error(
        door: str, store_kind: str, store_url: str) -> None:
    call, by_backend = DOORS[door]
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "stored")
        before = snapshot(store)
        with pytest.raises(SessionNotStoredError) as caught:
            call(store, "nope")
        after = snapshot(store)
    error = caught.value
    assert type(error) is SessionNotStoredError
    assert isinstance(error, PersistenceError)  # what callers caught before it had a type
    assert isinstance(error, LookupError)  # as the read model's SessionNotFoundError is
    assert isinstance(error, DshSessionError)
    assert error.session_id == "nope"
    # The reference's message, which code and tests of both implementations match...
    assert str(error) == 'session "nope" not found'
    # ... and, under it in a traceback, what to do.
    # A backend names its store as --store does (the kit's URL: a plain JSONL store by
    # its folder; the test server's URL holds no password); a memory store cannot be.
    where = store_url if by_backend and store_kind != "memory" else None
    assert error.location == where
    in_store = "" if where is None else f" in {where}"
    assert error.__notes__ == [
        f"nothing is stored under this id{in_store}: store.stored() lists the ids that "
        f"are (`dsh-session ls --store {where or 'URL'}` from the command line)"]
    shown = "".join(traceback.format_exception(error))
    assert "dsh_session_core.errors.SessionNotStoredError: session \"nope\" not found\n" in shown
    assert "store.stored() lists the ids" in shown
    assert after == before  # a refused look changes nothing


def test_it_pickles_as_itself() -> None:
    error = SessionNotStoredError("chat-1", location="/srv/sessions")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is SessionNotStoredError
    assert (again.session_id, again.location, str(again), again.args) == (
        "chat-1", "/srv/sessions", 'session "chat-1" not found', error.args)
    assert again.__notes__ == error.__notes__
    assert b"dsh_session_core.errors\nSessionNotStoredError" in pickle.dumps(error, protocol=0)
