"""The PostgreSQL backend's index trailing its batches (:mod:`.sql.trail`).

A small batch goes in by :data:`~.postgres.schema.APPEND` alone: its index entries
were a third of a small flush's time on the server and the client. The batch that
reaches the trail's bound goes in by :data:`~.postgres.index.APPEND_INDEXED` (its
entries in its own statement, when its session's index is in step), and then, in a
transaction of its own under the lock that serializes catch-ups, the sessions this
backend left behind are caught up: a flush stays one round trip but once in
:data:`~.sql.trail.TRAIL_LIMIT` events. A mixin of
:class:`~.postgres.backend.PostgresBackend`, which owns the connections.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from ....events import Event
from ..sql import index as sql_index
from ..sql.trail import Trail
from .index import APPEND_INDEXED, INDEX_SQL, SEARCH_LOCK_KEY, index_columns
from .schema import APPEND, Columns

if TYPE_CHECKING:
    import psycopg

__all__ = ["SEARCH_LOCK", "PostgresTrail"]

#: Takes the lock of :data:`~.postgres.index.SEARCH_LOCK_KEY` until the transaction ends.
SEARCH_LOCK: Final = "SELECT pg_advisory_xact_lock(%s)"
#: This transaction's commit does not wait for its WAL to reach the disk.
_ASYNC_COMMIT: Final = "SET LOCAL synchronous_commit = off"


class PostgresTrail:
    """The batches' index plan and the catch-ups (:class:`~.postgres.backend.PostgresBackend`
    sets what is declared here)."""

    _lock: threading.Lock
    _conn: psycopg.Connection[Any]
    _indexed: bool
    _trail: Trail

    if TYPE_CHECKING:
        @staticmethod
        def _errors() -> Any: ...

    def _plan(self, session_id: str, columns: Columns, events: Sequence[Event],
              jsonl: bytes) -> tuple[str, dict[str, int] | None]:
        """A batch's statement (its index entries added to ``columns`` when it carries
        them), and the sessions to catch up once it is committed (:meth:`_catch_up_due`;
        ``None``: none)."""
        if not self._indexed:
            return APPEND, None
        due = self._trail.due(session_id, len(events))
        if due is None:
            return APPEND, None
        if session_id in due:  # its index lags: the statement would not index it
            return APPEND, due
        index_columns(columns, events, jsonl)
        return APPEND_INDEXED, due or None

    def _catch_up_due(self, due: dict[str, int]) -> None:
        """Catch up the sessions ``due`` (:meth:`_plan`), once the batch is committed.
        A failure leaves them counted, for the next search or batch: the batch is
        stored, and its caller must not be told otherwise."""
        try:
            with self._lock, self._catching_up(self._conn):
                sql_index.catch_up_sessions(INDEX_SQL, self._conn, list(due))
        except self._errors().Error:
            return
        self._trail.settle(due)

    def _catch_up_left(self) -> None:
        """At close: catch up the sessions this backend left unindexed (at most the
        trail's bound), so that a writer that closes leaves no backlog and the one a
        search meets is bounded by the writers still running (and any that died). Best
        effort, as :meth:`_catch_up_due`."""
        if self._indexed and self._trail.lagging and not self._conn.closed:
            self._catch_up_due(self._trail.taken())

    @staticmethod
    @contextlib.contextmanager
    def _catching_up(conn: psycopg.Connection[Any]) -> Iterator[None]:
        """A catch-up's transaction, under the lock that serializes catch-ups (and
        repairs) between processes, committed without waiting for the server's WAL
        flush: the index is derived from the rows, so a catch-up lost to a crash of
        the server is done again by the next search (an asynchronous commit is lost
        whole, or kept whole: never in part)."""
        with conn.transaction():
            conn.execute(_ASYNC_COMMIT)
            conn.execute(SEARCH_LOCK, (SEARCH_LOCK_KEY,))
            yield
