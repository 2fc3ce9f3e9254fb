"""What the PostgreSQL tests ask the server itself: whether a query of the test's
database is waiting on a lock (a race is played only once it really is)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

__all__ = ["OLD_TABLES", "until_a_query_waits_on_a_lock"]

#: The tables of a PostgreSQL store as the builds of schema versions 1 and 2 made them
#: (version 2 added the search index beside them), for the migration tests.
OLD_TABLES = (
    "CREATE TABLE dsh_session_schema (version integer NOT NULL,"
    " only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row))",
    "CREATE TABLE sessions (id text PRIMARY KEY, version integer NOT NULL,"
    " created_at bigint NOT NULL, cwd text, parent_session text, seed_length bigint)",
    "CREATE TABLE events (session_id text NOT NULL REFERENCES sessions(id)"
    " ON DELETE CASCADE, seq bigint NOT NULL, type text NOT NULL, time bigint NOT NULL,"
    " data text NOT NULL, source_event_seqs text, surface_op text,"
    " PRIMARY KEY (session_id, seq))",
    "CREATE INDEX sessions_by_created_at ON sessions (created_at, id)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, created_at)",
)


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
