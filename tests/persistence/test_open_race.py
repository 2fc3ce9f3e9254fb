"""An open that loses its writer lock to another writer between reading the log and
taking the lock leaves nothing of itself behind: the store it failed in may open and
delete the session afterwards as any other store may (before, a state still bound to
the never-registered session refused both as "a live session of this store" for the
store's life: a LangGraph saver waiting on a rewrite then never saw its delete land)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_session_core.errors import SessionLockedError
from lifecycle_support import Clock, opened, sessions, write

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


def test_an_open_that_loses_the_lock_after_its_load_leaves_nothing_bound(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "t")
    with opened(store_url) as store, opened(store_url) as other:
        real = store.persistence.load
        taken: list[Any] = []

        def load(session_id: str) -> Any:
            stored = real(session_id)
            if not taken:  # another writer takes the session right after the read
                taken.append(other.open(session_id))
            return stored

        monkeypatch.setattr(store.persistence, "load", load)
        with pytest.raises(SessionLockedError):
            store.open("t")
        assert store.get("t") is None
        other.release(taken[0])
        store.delete("t")  # the store that failed deletes it: nothing left bound
        assert sessions(store) == []
        write(store, clock, "t")
        session = store.open("t")  # and opens it
        assert session.id == "t"
        store.release(session)
