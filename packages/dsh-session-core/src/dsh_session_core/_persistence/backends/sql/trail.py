"""How far a SQL backend lets its search index trail the rows it commits.

A small flush does not index its events: that was a third to a half of its cost (the
index's own pages, written and synced with every commit). The rows are committed
alone, and the next search catches the index up first, in one transaction of its own
(:func:`~.sql.index.catch_up`), or, when it cannot write, checks the rows past the
index one by one: either way its answer is the one a fully indexed store gives.

What a backend left unindexed is bounded, so that no search meets an unbounded
backlog: :class:`Trail` counts the events this backend committed without indexing
them, per session, and once a batch would take the count to :data:`TRAIL_LIMIT`, that
batch is indexed as it is written and every session this backend left behind is
caught up with it. A batch of that many events or more is thus always indexed as it is
written (it would be indexed all the same by the search, from its rows read back).

The count is this backend's own: another process's writer keeps its own, and rows
written by a writer without the index (the reference) are found by the search as
before. A backend's close catches up what it left, so a search faces at most
:data:`TRAIL_LIMIT` events per writer still running (and what writers that died left).
No count is shared between writers: a row every flush updated would serialize them.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Final

__all__ = ["TRAIL_LIMIT", "Trail"]

#: Events a backend may leave unindexed, across its sessions, before a batch catches
#: them up. Catching an event up costs about what indexing it at write did (its row is
#: read back and its line decoded, where the batch had its typed event), so the bound
#: buys nothing in throughput: it caps the pause of the flush that reaches it, and what
#: the first search after a run of small flushes indexes, at a few milliseconds
#: (``bench/search_trail.py``: 256 events, 42 flushes of 6, cost that search 5 to 16
#: ms more on SQLite and PostgreSQL, on a loaded two-core machine).
TRAIL_LIMIT: Final = 256


class Trail:
    """The events a backend committed without indexing them, per session.

    :param limit: the bound (:data:`TRAIL_LIMIT`); 0 indexes every batch as it is
        written (the tests and the bench compare the two).

    Thread-safe: a PostgreSQL writer commits through its lease's connection, outside
    the backend's lock.
    """

    __slots__ = ("_lag", "_lock", "limit")

    def __init__(self, limit: int = TRAIL_LIMIT) -> None:
        self.limit = limit
        self._lag: dict[str, int] = {}
        self._lock = threading.Lock()

    def due(self, session_id: str, count: int) -> dict[str, int] | None:
        """Decide a batch of ``count`` events of a session: ``None`` when it is left
        unindexed (and counted), else the sessions to catch up with it (the counts
        taken: :meth:`settle` them once the index holds them), empty when none lags."""
        with self._lock:
            if sum(self._lag.values()) + count < self.limit:
                self._lag[session_id] = self._lag.get(session_id, 0) + count
                return None
            return dict(self._lag)

    def taken(self, sessions: Collection[str] = ()) -> dict[str, int]:
        """The counts of ``sessions`` (none given: of every one), as a catch-up of them
        begins: :meth:`settle` them once it is done."""
        with self._lock:
            if not sessions:
                return dict(self._lag)
            return {sid: n for sid, n in self._lag.items() if sid in sessions}

    def settle(self, taken: dict[str, int]) -> None:
        """Forget the counts ``taken``: the index holds those events (a batch counted
        since is kept)."""
        with self._lock:
            for sid, n in taken.items():
                left = self._lag.get(sid, 0) - n
                if left > 0:
                    self._lag[sid] = left
                else:
                    self._lag.pop(sid, None)

    @property
    def lagging(self) -> bool:
        """Whether this backend committed events it has not seen indexed since."""
        return bool(self._lag)
