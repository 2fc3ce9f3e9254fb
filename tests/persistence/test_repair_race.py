"""A crash repair is decided under the writer lock (issue 37, point 6).

``store.open`` reads the log without the lock, then takes it. A log read so may be
another writer's mid-turn (its turn open, as a run of the OpenAI Agents SDK keeps it
while it holds the session): that writer may append and let go between the read and
the lock. The repair must not be written from the stale read (its closers would take
seqs the other writer wrote: a duplicate key on a database, a log out of order on
JSONL); the log is read again under the lock, and what it holds is repaired, or
nothing when the other writer ended its turn."""

from __future__ import annotations

from typing import Any

from persist_support import Factory

from dsh_session_core import Session, create_plugin_manager
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.testing import turn_end, user_turn


def _store(backend: Any) -> DurableStore:
    return DurableStore(backend, create_plugin_manager(autoload=False))


class _WriterGoesOnAfterTheRead:
    """A backend whose first read of the log lets another writer go on first: once the
    log is read (its turn open), ``then()`` runs (the other writer ends its turn and
    lets go), and the stale read is returned."""

    def __init__(self, inner: Any, then: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.then = then

    def load_stored(self, *args: Any, **kwargs: Any) -> Any:
        stored = self.inner.load_stored(*args, **kwargs)
        then, self.then = self.then, None
        if then is not None:
            then()
        return stored

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_repair_is_not_written_from_a_read_another_writer_outran(storage: Factory) -> None:
    writer = _store(storage())
    live: Session = writer.create("s", cwd="/w")
    user_turn(live, 1, "q1")
    user_turn(live, 2, "q2", end=False)  # the other writer's turn, open
    writer.flush(live)

    def other_writer_ends_its_turn() -> None:
        turn_end(live, 2)
        user_turn(live, 3, "q3")
        writer.release(live)

    opener = _store(_WriterGoesOnAfterTheRead(storage(), other_writer_ends_its_turn))
    opened = opener.open("s")
    reasons = [e.data.reason.kind for e in opened.events if e.type == "turn/end"]
    assert reasons == ["completed", "completed", "completed"]  # no "interrupted"
    user_turn(opened, 4, "q4")
    opener.close()
    writer.close()
    stored = _store(storage()).read_session("s").events
    assert [e.seq for e in stored] == list(range(len(stored)))
    assert [e.data.reason.kind for e in stored if e.type == "turn/end"] == ["completed"] * 4
