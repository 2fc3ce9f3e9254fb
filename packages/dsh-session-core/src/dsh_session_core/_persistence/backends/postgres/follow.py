"""The PostgreSQL backend's readers that never write: a session's tail, and its follower.

The follower waits on NOTIFY instead of polling.

Every batch and repair notifies the session's channel (``NOTIFY dsh_session_<hash>``,
delivered at commit, see :mod:`.postgres.schema`); a follower LISTENs to it on a
connection of its own and reads the events table only when told something changed.
The functions take a connection (or a way to make one), so the backend class
(:mod:`.postgres.backend`) keeps the connections and this module the queries' logic.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..sql.rows import row_line
from .schema import SELECT_AFTER, SELECT_FOUND, SELECT_LAST, SELECT_TAIL, channel_of, text_ok

if TYPE_CHECKING:
    import psycopg

__all__ = ["afollow", "atail", "cut_note", "follow", "tail"]

#: A follow report: the last stored seq, and the new lines (none: the log was cut back
#: to that seq).
News = tuple[int, list[bytes]]


def cut_note(top: int) -> str:
    """What a follower tells people when a repair cut the session back to seq ``top``."""
    return f"the session was cut back to seq {top} (a repair?); following from there"


def tail(conn: psycopg.Connection[Any], session_id: str, count: int
         ) -> tuple[list[bytes], int] | None:
    """The last ``count`` events' log lines, oldest first, and the last stored seq
    (``-1`` when none is); ``None`` when the session is not stored. The lines are read
    up to that seq, so a commit between the two queries is left for the follower."""
    if not text_ok(session_id):
        return None  # no row can hold this id
    if conn.execute(SELECT_FOUND, (session_id,)).fetchone() is None:
        return None
    (last,) = conn.execute(SELECT_LAST, (session_id,)).fetchone()  # type: ignore[misc]
    rows = conn.execute(SELECT_TAIL, (session_id, last, max(count, 0))).fetchall()
    return [row_line(row) for row in reversed(rows)], int(last)


# The twin of tail, on psycopg's async API: keep the two in step.
async def atail(conn: psycopg.AsyncConnection[Any], session_id: str, count: int
                ) -> tuple[list[bytes], int] | None:
    """:func:`tail` for asyncio hosts, on an ``AsyncConnection``."""
    if not text_ok(session_id):
        return None
    if await (await conn.execute(SELECT_FOUND, (session_id,))).fetchone() is None:
        return None
    (last,) = await (await conn.execute(SELECT_LAST, (session_id,))).fetchone()  # type: ignore[misc]
    cur = await conn.execute(SELECT_TAIL, (session_id, last, max(count, 0)))
    rows = await cur.fetchall()
    return [row_line(row) for row in reversed(rows)], int(last)


def _news(rows: Sequence[tuple[Any, ...]], top: int, last: int) -> News | None:
    """What a follower reports: the new rows' lines, or a cut back to ``top``."""
    if rows:
        return int(rows[-1][0]), [row_line(row) for row in rows]
    if top < last:
        return top, []
    return None


def follow(
    connect: Callable[[str], psycopg.Connection[Any]],
    session_id: str,
    after: int,
    timeout: float | None,
) -> Iterator[News]:
    """Follow a session live on a connection of its own (``connect(application)``):
    yield ``(last seq, lines)`` for the events stored after seq ``after``, as they are
    committed. A repair that cut the log back yields ``(new last seq, [])``. With
    ``timeout``, stops after that many seconds without a notification."""
    conn = connect("dsh-session follower")
    try:
        conn.execute(f"LISTEN {channel_of(session_id)}")  # a hex-derived identifier
        last = after
        while True:
            # Listening before reading: a commit after this read is notified, and
            # psycopg (>= 3.2.4) keeps a notification that arrives during the read for
            # the next notifies().
            rows = conn.execute(SELECT_AFTER, (session_id, last)).fetchall()
            (top,) = conn.execute(SELECT_LAST, (session_id,)).fetchone()  # type: ignore[misc]
            news = _news(rows, top, last)
            if news is not None:
                last = news[0]
                yield news
            got = False
            for _ in conn.notifies(timeout=timeout, stop_after=1):
                got = True
            if not got:
                return
    finally:
        conn.close()


async def afollow(
    aconnect: Callable[[str], Awaitable[psycopg.AsyncConnection[Any]]],
    session_id: str,
    after: int,
    timeout: float | None,
) -> AsyncGenerator[News, None]:
    """:func:`follow` for asyncio hosts: the same reports, waiting on NOTIFY without
    blocking the loop."""
    conn = await aconnect("dsh-session follower")
    try:
        await conn.execute(f"LISTEN {channel_of(session_id)}")
        last = after
        while True:
            rows = await (await conn.execute(SELECT_AFTER, (session_id, last))).fetchall()
            (top,) = await (await conn.execute(SELECT_LAST, (session_id,))).fetchone()  # type: ignore[misc]
            news = _news(rows, top, last)
            if news is not None:
                last = news[0]
                yield news
            got = False
            async for _ in conn.notifies(timeout=timeout, stop_after=1):
                got = True
            if not got:
                return
    finally:
        await conn.close()
