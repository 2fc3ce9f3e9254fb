"""The PostgreSQL backend's asyncio side, on psycopg's ``AsyncConnection``.

Batches, listing, the tail and following, so an asyncio host's event loop runs while the
server works. A mixin of :class:`~.postgres.backend.PostgresBackend`, which owns the URL,
the connection settings and the synchronous twins of these methods (keep them in step).
Each event loop keeps its own idle connections: a transaction cannot share one.
"""

from __future__ import annotations

import builtins
import contextlib
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from ...._schema.header import SessionHeader
from ....events import Event
from ...base import LogNews, LogTail
from ..sql.rows import header_of
from . import follow as postgres_follow
from .schema import (
    SELECT_HEADERS,
    SELECT_LAST,
    SELECT_STORED_ROWS,
    UPSERT_SESSION,
    Columns,
    Refused,
    batch_columns,
    checked_header,
    conflict,
    same_rows,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresAsync"]


class PostgresAsync:
    """The asyncio methods (:class:`~.postgres.backend.PostgresBackend` sets what is declared
    here)."""

    url: str
    _indexed: bool
    _aidle: weakref.WeakKeyDictionary[Any, builtins.list[psycopg.AsyncConnection[Any]]]

    if TYPE_CHECKING:
        def _plan(self, session_id: str, columns: Columns, events: Sequence[Event],
                  jsonl: bytes) -> tuple[str, dict[str, int] | None]: ...

        def _catch_up_due(self, due: dict[str, int]) -> None: ...

        def _catch_up_left(self) -> None: ...

        @staticmethod
        def _errors() -> Any: ...

        def _connect_args(self, application: str) -> dict[str, Any]: ...

        def close(self) -> None: ...

    async def aappend_batch(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        jsonl: bytes,
        materialized: bool,
    ) -> None:
        """:meth:`~.postgres.backend.PostgresBackend.append_batch` for asyncio hosts, on psycopg's
        ``AsyncConnection``: the event loop runs while the server commits. Same checks,
        same guarantees (the checked insert, not the connection, is what keeps the log
        gap- and duplicate-free, so any connection may carry a leased session's
        batch)."""
        if not events:
            return
        columns, before = batch_columns(header.id, events, jsonl)
        columns["before"] = before
        statement, due = self._plan(header.id, columns, events, jsonl)
        head = None if materialized else checked_header(header)
        conn = await self._atake()
        try:
            await self._awrite(conn, header.id, columns, head, statement)
        finally:
            self._agive(conn)
        if due is not None:  # on the backend's own connection, off the event loop
            import asyncio

            await asyncio.to_thread(self._catch_up_due, due)

    # The twin of PostgresBackend._write, on psycopg's async API: keep the two in step.
    async def _awrite(
        self,
        conn: psycopg.AsyncConnection[Any],
        session_id: str,
        columns: Columns,
        head: tuple[Any, ...] | None,
        statement: str,
    ) -> None:
        seqs = columns["seqs"]
        try:
            if head is None:
                if await (await conn.execute(statement, columns)).fetchone() is not None:
                    return
                raise Refused
            async with conn.transaction():
                await conn.execute(UPSERT_SESSION, head)
                if await (await conn.execute(statement, columns)).fetchone() is None:
                    raise Refused
                return
        except Refused:
            pass
        except self._errors().errors.UniqueViolation:
            pass
        cur = await conn.execute(SELECT_STORED_ROWS, (session_id, seqs[0], seqs[-1] + 1))
        if same_rows(await cur.fetchall(), columns):
            return
        cur = await conn.execute(SELECT_LAST, (session_id,))
        (last,) = await cur.fetchone()  # type: ignore[misc]
        raise conflict(session_id, last, seqs[0])

    async def alist(self) -> builtins.list[SessionHeader]:
        """:meth:`list` for asyncio hosts, on psycopg's ``AsyncConnection``."""
        conn = await self._atake()
        try:
            rows = await (await conn.execute(SELECT_HEADERS)).fetchall()
        finally:
            self._agive(conn)
        return [header_of(row) for row in rows]

    async def atail_lines(self, session_id: str, count: int) -> LogTail | None:
        """:meth:`tail_lines` for asyncio hosts, on psycopg's ``AsyncConnection``."""
        conn = await self._atake()
        try:
            found = await postgres_follow.atail(conn, session_id, count)
        finally:
            self._agive(conn)
        return None if found is None else LogTail(*found)

    async def afollow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> AsyncIterator[LogNews]:
        """:meth:`follow_lines` for asyncio hosts: :meth:`afollow`'s reports, as the
        protocol gives them (a cut back comes with a note). Closing it (or cancelling
        its consumer) closes its listening connection."""
        if type(position) is not int:
            msg = f"a PostgreSQL position is a seq (int), got {position!r}"
            raise TypeError(msg)
        async with contextlib.aclosing(
            postgres_follow.afollow(self._aconnect, session_id, position, timeout)
        ) as reports:
            async for top, lines in reports:
                yield LogNews(lines, top, None if lines else postgres_follow.cut_note(top))

    async def _aconnect(self, application: str = "dsh-session") -> psycopg.AsyncConnection[Any]:
        import psycopg

        return await psycopg.AsyncConnection.connect(
            self.url, **self._connect_args(application)
        )

    async def _atake(self) -> psycopg.AsyncConnection[Any]:
        """An idle connection of this event loop's, or a new one: each batch has a
        connection to itself, as transactions cannot share one."""
        import asyncio

        idle = self._aidle.setdefault(asyncio.get_running_loop(), [])
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        return await self._aconnect()

    def _agive(self, conn: psycopg.AsyncConnection[Any]) -> None:
        import asyncio

        if conn.broken or conn.closed:
            return
        self._aidle.setdefault(asyncio.get_running_loop(), []).append(conn)

    async def aclose(self) -> None:
        """Close this event loop's connections, then everything :meth:`close` closes."""
        import asyncio

        for conn in self._aidle.pop(asyncio.get_running_loop(), []):
            await conn.close()
        await asyncio.to_thread(self._catch_up_left)  # off the event loop: see close
        self.close()
