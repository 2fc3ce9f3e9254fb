"""Two writers create one new id at once (two processes, as the OpenAI Agents SDK's
sessions may): whichever comes second gets ``SessionExistsError``, whatever its
backend's own refusal was (a log file that exists, a duplicate key), and the first
writer's log is untouched.

- A writer of ours takes the session's writer lock at create, and then looks again for
  a stored log: one that another writer created, wrote and released between create's
  first look and the lock is refused at create (issue 24: so ``open_or_create`` can
  open it instead of returning a session doomed at its first flush). The race is made
  deterministic: the second store's lock acquisition first lets the whole first writer
  run.
- A writer that takes no lock (the reference implementation has none) can still write
  the id after create: the first flush is then refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_session_core import Session, open_store
from dsh_session_core.errors import SessionExistsError

# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

def _first_turn_is(store: Any, text: str) -> None:
    stored = store.open("x")
    assert [e.type for e in stored.events] == ["turn/start", "user/message", "turn/end"]
    assert stored.events[1].data.content[0].text == text
    store.release(stored)


def test_the_second_creator_of_an_id_is_told_it_exists_at_create(store_url: str) -> None:
    with open_store(store_url) as first, open_store(store_url) as second:
        acquire = second.backend.acquire

        def first_writer_wins(header: Any) -> Any:
            session = first.create("x")
            with session.turn() as turn:
                turn.user("first")
            first.release(session)
            return acquire(header)

        second.backend.acquire = first_writer_wins  # type: ignore[method-assign]
        with pytest.raises(SessionExistsError, match='session "x" already exists'):
            second.create("x")
        second.backend.acquire = acquire  # type: ignore[method-assign]
        assert second.get("x") is None
        _first_turn_is(first, "first")
        # The refused create let go of the lock: the id can be opened by the second.
        reopened = second.open("x")
        assert not reopened.created
        second.release(reopened)


def test_a_writer_without_the_lock_makes_the_second_first_flush_fail(store_url: str) -> None:
    with open_store(store_url) as first, open_store(store_url) as second:
        late = second.create("x")
        with late.turn() as turn:
            turn.user("second")
        lockless = Session("x")  # a writer taking no lock, as the reference's
        with lockless.turn() as turn:
            turn.user("first")
        first.backend.append_batch(lockless.header, list(lockless.events),
                                   lockless.jsonl(), False)
        with pytest.raises(SessionExistsError, match='session "x" already exists'):
            second.flush(late)
        second.detach(late)
        _first_turn_is(first, "first")
