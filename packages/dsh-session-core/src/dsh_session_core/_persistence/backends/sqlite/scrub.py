"""A SQLite database scrubbed after a forget: no deleted byte left in its files.

A ``DELETE`` in SQLite unlinks the rows from its b-trees but leaves their bytes where
they were: in the free space of a page, in pages put on the freelist, in an FTS5
index's older segments (a deleted row is a tombstone there until the segments are
merged), in the write-ahead log's frames and in a ``persist`` rollback journal. Each is
readable with ``strings``. :func:`scrub_database` clears them all, once, after the rows
went: the FTS5 indexes merged (``optimize``), the file rebuilt by ``VACUUM`` with
``secure_delete`` on (the pages it frees are zeroed, not left as they were), the WAL
checkpointed and truncated to nothing, a persisted journal cut to nothing.

Used by the SQLite backend (its database) and by the JSONL backend (its projection
sidecar, a SQLite database too). ``VACUUM`` rewrites the whole file: a forget costs
about what copying the database costs, which a rare, deliberate erasure can pay.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = ["scrub_database"]


def scrub_database(conn: sqlite3.Connection, fts_tables: Sequence[str] = ()) -> str | None:
    """Scrub the database of ``conn`` (an autocommit connection, outside a transaction).

    :param fts_tables: the FTS5 tables whose segments are merged first.
    :returns: ``None`` when every file is clean; else, for people, what is left (the
        write-ahead log could not be truncated: another connection reads the database).
    :raises sqlite3.Error: the database cannot be vacuumed (busy, read-only, full).
    """
    (before,) = conn.execute("PRAGMA secure_delete").fetchone()
    (limit,) = conn.execute("PRAGMA journal_size_limit").fetchone()
    conn.execute("PRAGMA secure_delete = ON")
    # A `persist` journal keeps the pages a transaction changed, its header zeroed:
    # cut it to nothing after each transaction while this runs.
    conn.execute("PRAGMA journal_size_limit = 0")
    try:
        for table in fts_tables:
            # (Only a checked, fixed table name is interpolated: a statement of FTS5's.)
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        conn.execute("VACUUM")
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        if str(mode).lower() == "wal":
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                return ("its write-ahead log could not be truncated (another connection "
                        "reads the database): its old frames stay until the next "
                        "checkpoint overwrites them")
        return None
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(before)}")
        conn.execute(f"PRAGMA journal_size_limit = {int(limit)}")
