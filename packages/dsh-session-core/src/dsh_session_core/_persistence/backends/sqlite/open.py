"""Opening a SQLite store's database: its versions, its migrations, its index tables.

The reference's schema version, dsh-session's own tables beside it and their version,
the migrations a database written before them takes when it is opened, and the search
index's tables.

Two versions, kept apart. ``PRAGMA user_version`` is the reference's (4): a database of
another one is refused, and it is never changed, so the reference keeps reading and
writing what this build writes. dsh-session's own tables have theirs, in
``dsh_session_schema`` (:data:`~.sqlite.schema.OWN_VERSION`): a database written by the
reference, or by a build from before them, has none (0), and is migrated when a
connection that may write it opens it:

- **0 to 1**: ``dsh_event_lines`` (the lines their rows would not give back) and its
  triggers are made, and nothing else: no row is read or rewritten. The rows already
  there have no kept line; they are read as their columns rebuild them, as before, but
  for the crash-repair closers among them, which come back as the reference writes
  them, ``surfaceOp`` before ``sourceEventSeqs`` (the one key order of old rows that is
  known: :data:`~.sqlite.schema.CLOSER`, whoever wrote the row).
- **1 to 2**: the projections' tables, their index and the trigger that deletes a
  session's rows with it (:data:`~.sqlite.schema.PROJECTION_SCHEMA`); empty: the
  write path folds each session's rows from its log when it next writes it, and until
  then a read folds the log.

A migration is one short write transaction that reads the version again under the write
lock: two processes opening the database at once migrate it once. A database of an
older own version that this connection cannot write is read as it stands: empty
temporary tables stand in for the missing ones (no line is kept there yet, no
projection row), until a connection that may write opens it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Final, TypeAlias

from ....errors import SchemaVersionError
from .schema import (
    ALL_TABLES,
    INDEX_SCHEMA,
    INDEX_TABLES,
    LINES_SCHEMA,
    OWN_SCHEMA,
    OWN_VERSION,
    PROJECTION_SCHEMA,
    SCHEMA,
    SCHEMA_VERSION,
    SELECT_INDEX_TABLES,
    SELECT_OWN_VERSION,
    STAMP_OWN,
    TEMP_KEPT,
    TEMP_PROJECTIONS,
    read_only,
)

__all__ = ["open_database", "own_version"]

Transaction: TypeAlias = Callable[[], AbstractContextManager[sqlite3.Connection]]

#: What a database of each older own version is given, in order, up to
#: :data:`OWN_VERSION`.
_MIGRATIONS: Final = {0: LINES_SCHEMA, 1: PROJECTION_SCHEMA}

# The reference's version, how many of the tables there are, and whether the own
# version's table is: one statement.
_SELECT_STATE: Final = (
    "SELECT (SELECT user_version FROM pragma_user_version), count(*),"
    " coalesce(sum(name = 'dsh_session_schema'), 0) FROM sqlite_master"
    f" WHERE type = 'table' AND name IN ({', '.join(repr(t) for t in ALL_TABLES)})"
)


def _user_version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def own_version(conn: sqlite3.Connection, there: bool | None = None) -> int:
    """The version of dsh-session's own tables: 0 when it has none.

    :param there: whether ``dsh_session_schema`` exists, when already known."""
    if there is None:
        there = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                             " AND name = 'dsh_session_schema'").fetchone() is not None
    row = conn.execute(SELECT_OWN_VERSION).fetchone() if there else None
    return 0 if row is None else int(row[0])


def _too_new(path: str, version: int) -> SchemaVersionError:
    return SchemaVersionError(
        path, version, expected=OWN_VERSION,
        detail="the version of dsh-session's own tables (dsh_session_schema), which a "
               "newer dsh-session wrote: open the database with that one")


def open_database(conn: sqlite3.Connection, path: str, transaction: Transaction) -> bool:
    """Check the versions of the database ``conn`` is on and bring it to this build's:
    stamp and create a fresh one, migrate one of an older own version, add the search
    index's tables. Returns whether the search index is there (see :func:`_open_index`).

    :param path: the database, for messages.
    :param transaction: a write transaction on ``conn`` (``BEGIN IMMEDIATE``).
    :raises SchemaVersionError: another ``user_version`` than 4, or own tables of a newer
        version.
    """
    # A database of this version with every table (each open but a file's first) needs
    # no CREATE: one read of the schema, and of the own version, says so. (Measured:
    # the statements of an open cost 0.17 ms, most of it SQLite reading the schema,
    # which any first query pays.)
    version, tables, there = conn.execute(_SELECT_STATE).fetchone()
    if version == SCHEMA_VERSION:
        own = own_version(conn, bool(there))
        if own > OWN_VERSION:
            raise _too_new(path, own)
        if tables == len(ALL_TABLES) and own == OWN_VERSION:
            return True
    stamped = False
    if version == 0:
        # Stamp and create in one transaction, re-reading the version under the write
        # lock: two processes opening a fresh file cannot both stamp it.
        with transaction():
            version = _user_version(conn)
            if version == 0:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                for statement in (*SCHEMA, *OWN_SCHEMA):
                    conn.execute(statement)
                conn.execute(STAMP_OWN, (OWN_VERSION,))
                version, stamped = SCHEMA_VERSION, True
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(path, version)
    if not stamped:  # a database stamped by a build that stopped before its tables
        for statement in SCHEMA:
            conn.execute(statement)
        _migrate(conn, path, transaction)
    return _open_index(conn, transaction)


def _migrate(conn: sqlite3.Connection, path: str, transaction: Transaction) -> None:
    """Bring dsh-session's own tables to :data:`OWN_VERSION` (see the module), or, when
    the database cannot be written, read it as it stands."""
    if own_version(conn) == OWN_VERSION:
        return
    try:
        with transaction():
            own = own_version(conn)  # again, under the write lock
            if own in _MIGRATIONS:
                for step in range(own, OWN_VERSION):
                    for statement in _MIGRATIONS[step]:
                        conn.execute(statement)
                conn.execute(STAMP_OWN, (OWN_VERSION,))
    except sqlite3.OperationalError as exc:
        if not read_only(exc):
            raise
        own = own_version(conn)
        if own > OWN_VERSION:
            raise _too_new(path, own) from None
        for statement in (*((TEMP_KEPT,) if own == 0 else ()), *TEMP_PROJECTIONS):
            conn.execute(statement)
        return
    own = own_version(conn)
    if own != OWN_VERSION:
        raise _too_new(path, own)


def _open_index(conn: sqlite3.Connection, transaction: Transaction) -> bool:
    """Create the search index's tables when they are missing (a database written by
    the reference, or by a build without the index); whether they are there. A database
    that cannot be written, or an SQLite built without FTS5, is searched without them
    (every line checked)."""
    if conn.execute(SELECT_INDEX_TABLES).fetchone()[0] == len(INDEX_TABLES):
        return True
    if not _has_fts5(conn):
        return False
    try:
        with transaction():
            for statement in INDEX_SCHEMA:
                conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if not read_only(exc):
            raise
        return False
    return True


def _has_fts5(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has FTS5, as its compile options say: asked first, since
    the refusal to create an FTS5 table without it ("no such module") has no result
    code of its own. (An SQLite that does not list its options is searched without
    the index: slower, the same hits.)"""
    return any(row[0] == "ENABLE_FTS5" for row in conn.execute("PRAGMA compile_options"))
