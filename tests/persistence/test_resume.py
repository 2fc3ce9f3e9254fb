"""``DurableStore.open(id, resume=session)`` (issue 25, point 4): a session this store
released is taken back without loading its log, reading only what was stored after its
last event, on every backend; a log that no longer continues it is loaded whole; and
``DurableStore.discard`` drops a live session without writing what it buffered."""

from __future__ import annotations

import pytest

from dsh_session_core import open_store
from lifecycle_support import user_texts

# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")

def test_a_released_session_is_taken_back_with_what_others_stored(store_url: str) -> None:
    with open_store(store_url) as store, open_store(store_url) as other:
        mine = store.create("s")
        with mine.turn() as turn:
            turn.user("one")
        store.release(mine)
        again = store.open("s", resume=mine)
        assert again is mine  # nobody wrote: the very object, live again
        with again.turn() as turn:
            turn.user("two")
        store.release(again)
        theirs = other.open("s")
        with theirs.turn() as turn:
            turn.user("theirs")
        other.release(theirs)
        back = store.open("s", resume=again)
        assert back is not again
        assert user_texts(back) == ["one", "two", "theirs"]
        assert [e.seq for e in back.events] == list(range(len(back.events)))
        with back.turn() as turn:
            turn.user("three")
        store.release(back)
        assert user_texts(other.read_session("s")) == ["one", "two", "theirs", "three"]


def test_a_log_that_no_longer_continues_the_session_is_loaded_whole(store_url: str) -> None:
    with open_store(store_url) as store, open_store(store_url) as other:
        mine = store.create("s")
        with mine.turn() as turn:
            turn.user("one")
        store.release(mine)
        other.delete("s")
        new = other.create("s")
        with new.turn() as turn:
            turn.user("another one")
        other.release(new)
        back = store.open("s", resume=mine)
        assert back is not mine
        assert user_texts(back) == ["another one"]
        store.release(back)


def test_discard_writes_nothing_of_what_was_buffered(store_url: str) -> None:
    with open_store(store_url) as store:
        session = store.create("s")
        with session.turn() as turn:
            turn.user("kept")
        store.flush(session)
        with session.turn() as turn:
            turn.user("dropped")
        store.discard(session)
        assert store.get("s") is None
        with open_store(store_url) as other:
            reopened = other.open("s")  # the writer lock was released
            assert user_texts(reopened) == ["kept"]
            other.release(reopened)
    with open_store(store_url) as store:  # closing wrote nothing more either
        assert user_texts(store.read_session("s")) == ["kept"]
