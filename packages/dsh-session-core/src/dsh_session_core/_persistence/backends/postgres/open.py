"""Opening a PostgreSQL store's database: its schema version, its tables, its migrations.

Its schema version (``dsh_session_schema``), the tables of a database that has none,
and the migrations an older version takes when it is opened.

- **1 to 2**: the search index's tables (``search_docs``, ``search_state``); the
  sessions are indexed by the next search that reads them.
- **2 to 3**: ``events.line``, the log line as it was appended where the columns would
  not give it back (a column added without a default: no row is read or rewritten),
  and the trigger that forgets it when its row is changed by hand. Rows written before
  have no line: they are read as their columns rebuild them, as before, but for the
  crash-repair closers among them, which come back as the reference writes them,
  ``surfaceOp`` before ``sourceEventSeqs`` (the one key order of old rows that is
  known: :func:`~.rows.closer_row`).
- **3 to 4**: the projections' tables, their index and the trigger that deletes a
  session's rows with it (:data:`~.postgres.schema.PROJECTION_SCHEMA`); empty: the
  write path folds each session's rows from its log when it next writes it, and until
  then a read folds the log.

Every open takes a transaction-level advisory lock, and a migration re-reads the version
under it: two processes opening a database at once create or migrate it once, the
second waiting for the first. A database of an older version that this connection may
not change (a read-only role, a standby) is refused, saying so: this build reads
tables and columns it lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ....errors import PersistenceError, SchemaVersionError, StoreNotFoundError
from .schema import (
    CREATE_LINE_TRIGGER,
    INDEX_SCHEMA,
    PROJECTION_SCHEMA,
    SCHEMA,
    SCHEMA_VERSION,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["open_schema"]

#: Serializes schema creation between processes opening a fresh database at once.
_SCHEMA_LOCK_KEY: Final = 0x6473_685F_7363_6831  # "dsh_sch1"

_MIGRATIONS: Final = {
    1: INDEX_SCHEMA,
    2: ("ALTER TABLE events ADD COLUMN IF NOT EXISTS line text", *CREATE_LINE_TRIGGER),
    3: PROJECTION_SCHEMA,
}


def open_schema(conn: psycopg.Connection[Any], create: bool, location: str) -> bool:
    """Check the schema version of the database ``conn`` is on, or (``create``) make the
    tables in a database that has none; migrate a database of version 1 to 3 in place
    (see the module). Serialized between processes by an advisory transaction lock.
    Returns whether the search index is there (it always is, now).

    :param location: the database, for messages (without its password).
    :raises StoreNotFoundError: no tables, and not ``create``.
    :raises PersistenceError: ``sessions`` exists but dsh-session did not create it.
    :raises SchemaVersionError: another schema version, or an older one that this
        connection may not migrate.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
        (have_schema, have_sessions) = conn.execute(
            "SELECT to_regclass('dsh_session_schema') IS NOT NULL,"
            " to_regclass('sessions') IS NOT NULL"
        ).fetchone() or (False, False)
        if not have_schema:
            if not create:
                raise StoreNotFoundError(location, "the database has no tables")
            if have_sessions:
                msg = (
                    f"the database at {location} has a sessions table that "
                    f"dsh-session did not create; use another database (or schema, "
                    f"with options=-csearch_path=NAME in the URL)"
                )
                raise PersistenceError(msg, session_id="")
            for statement in (*SCHEMA, *CREATE_LINE_TRIGGER, *INDEX_SCHEMA,
                              *PROJECTION_SCHEMA):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO dsh_session_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
            )
            return True
        row = conn.execute("SELECT version FROM dsh_session_schema").fetchone()
    version = -1 if row is None else int(row[0])
    if version in _MIGRATIONS:
        _migrate(conn, location, version)
    elif version != SCHEMA_VERSION:
        raise SchemaVersionError(location, version, expected=SCHEMA_VERSION)
    return True


def _migrate(conn: psycopg.Connection[Any], location: str, version: int) -> None:
    """Bring a database of an older ``version`` to :data:`SCHEMA_VERSION`, in one
    transaction under the schema lock (the version re-read there: another process may
    have done it meanwhile).

    :raises SchemaVersionError: this connection may not change the database."""
    import psycopg

    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
            row = conn.execute("SELECT version FROM dsh_session_schema").fetchone()
            at = -1 if row is None else int(row[0])
            if at not in _MIGRATIONS:
                if at != SCHEMA_VERSION:
                    raise SchemaVersionError(location, at, expected=SCHEMA_VERSION)
                return
            for step in range(at, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute("UPDATE dsh_session_schema SET version = %s", (SCHEMA_VERSION,))
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction):
        raise SchemaVersionError(
            location, version, expected=SCHEMA_VERSION,
            detail="this connection may not migrate it (a read-only role or a standby); "
                   "open it once with a role that may change its tables, and it is "
                   "migrated in place") from None
