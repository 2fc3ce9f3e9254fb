"""What the PostgreSQL tests ask the server itself: whether a query of the test's
database is waiting on a lock (a race is played only once it really is)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

__all__ = ["until_a_query_waits_on_a_lock"]


async def until_a_query_waits_on_a_lock(url: str, patience: float = 60) -> None:
    """Return once some backend of this database waits on a lock; fail the test when
    none has within ``patience`` seconds (a bound against a hang, not a timing window).
    It polls every 10 ms, awaiting, so the waiting query's task keeps running."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while loop.time() < deadline:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'")
            row = await cur.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.01)
    pytest.fail("no query of the test's database ever waited on a lock")
