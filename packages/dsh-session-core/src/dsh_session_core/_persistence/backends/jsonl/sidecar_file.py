"""The projection sidecar's database file: where it is, how it is opened, made and
checked, and how a damaged one is removed.

The file is :data:`SIDECAR_FILE` in the folder :data:`SIDECAR_DIR` at a JSONL store's
root (what it holds, and why, is :mod:`.sidecar`'s). A writer makes the folder (mode
0700) and the file (0600: SQLite gives its WAL files the database's mode), then the
tables, in WAL mode; it writes with ``synchronous=NORMAL`` (derived data: a power loss
may take its last transactions, never the log's). A reader opens an existing file only,
and never makes one. The file is this release's when its ``application_id`` and
``user_version`` say so: a reader reads no other, a writer writes no newer release's,
and takes any other database, and a file that is no database or a malformed one, for
damaged (:func:`damaged`): removed (:func:`remove_damaged`), then made anew.

``sqlite3`` is imported here when a file is opened, never before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import urllib.parse
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "BUSY_SECONDS",
    "SIDECAR_DIR",
    "SIDECAR_FILE",
    "Foreign",
    "Unusable",
    "code",
    "damaged",
    "identity",
    "open_file",
    "remove_damaged",
]

#: The sidecar's folder, at a store's root (no bucket has this name).
SIDECAR_DIR: Final = ".projections"
#: The database in it.
SIDECAR_FILE: Final = "rows.sqlite3"
#: How long a write waits for another process's transaction before it leaves its rows
#: behind (each transaction is one flush's rows: milliseconds at most).
BUSY_SECONDS: Final = 1.0
#: ``PRAGMA application_id`` ("dshP") and ``user_version`` of the sidecar this release
#: writes.
_APPLICATION_ID: Final = 0x64736850
_VERSION: Final = 1

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS marks (session_id TEXT NOT NULL, projection TEXT NOT NULL,"
    " mark BLOB NOT NULL, summary BLOB, PRIMARY KEY (session_id, projection))"
    " WITHOUT ROWID",
    # Keys are BLOBs (UTF-8, surrogatepass), compared as bytes: code-point order.
    "CREATE TABLE IF NOT EXISTS rows (session_id TEXT NOT NULL, projection TEXT NOT NULL,"
    " key BLOB NOT NULL, row BLOB NOT NULL, PRIMARY KEY (session_id, projection, key))"
    " WITHOUT ROWID",
)


class Unusable(Exception):
    """The sidecar is not to be written now: a newer release's, or locked a moment ago."""


class Foreign(Exception):
    """The database is not a projection sidecar: a writer removes it, as a damaged one."""


def code(exc: BaseException) -> int:
    """The primary SQLite result code of an error (``-1``: none)."""
    found = getattr(exc, "sqlite_errorcode", None)
    return found & 0xFF if isinstance(found, int) else -1


def damaged(exc: BaseException) -> bool:
    """Whether ``exc`` says the file is damaged: no database, a malformed one, or some
    other database than a sidecar."""
    import sqlite3

    return isinstance(exc, Foreign) or (isinstance(exc, sqlite3.DatabaseError) and code(
        exc) in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT))


def identity(path: str) -> tuple[int, int] | None:
    """The file's (device, inode); ``None``: no file there, or not a plain one (a
    symbolic link is never followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def open_file(folder: str, path: str, *, write: bool
              ) -> tuple[sqlite3.Connection, tuple[int, int]] | None:
    """A connection to the sidecar ``path`` (in ``folder``), and the file it opened;
    ``write``: made if missing, and set up for writing. ``None``: (a reader) there is
    no sidecar to read, or it is not this release's.

    :raises sqlite3.Error, OSError: it cannot be opened (``damaged`` tells a damaged
        file), or (a writer) made.
    :raises Foreign: (a writer) it is some other database.
    :raises Unusable: (a writer) it is a newer release's, left as it is.
    """
    import sqlite3

    if write:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        if os.path.islink(folder):
            msg = f"{folder} is a symbolic link"
            raise OSError(msg)
        with contextlib.suppress(FileExistsError):  # empty: an empty database
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600))
    for _ in range(3):
        before = identity(path)
        if before is None or os.path.islink(folder):
            if write:
                msg = f"{path} is not a file"
                raise OSError(msg)
            return None
        # mode=rw never makes the file (a reader's open); SQLite opens a file it may
        # not write read-only.
        conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=rw", uri=True,
                               isolation_level=None, check_same_thread=False,
                               timeout=BUSY_SECONDS)
        try:
            ours = _check(conn, write=write)
        except BaseException:
            conn.close()
            raise
        if not ours or identity(path) != before:
            conn.close()
            if not ours:
                return None
            continue  # replaced while it was opened: open the new one
        return conn, before
    msg = f"{path} keeps being replaced"
    raise OSError(msg)


def _versions(conn: sqlite3.Connection) -> tuple[int, int]:
    return (conn.execute("PRAGMA application_id").fetchone()[0],
            conn.execute("PRAGMA user_version").fetchone()[0])


def _check(conn: sqlite3.Connection, *, write: bool) -> bool:
    """Whether the database is this release's sidecar (made so by a writer when it is
    empty); raises as :func:`open_file` says."""
    if _versions(conn) == (_APPLICATION_ID, _VERSION):
        if write:
            conn.execute("PRAGMA synchronous=NORMAL")
        return True
    if not write:
        return False
    conn.execute("PRAGMA journal_mode=WAL")  # stays the file's (it cannot be in BEGIN)
    # Decided in the write transaction: another writer may be making it meanwhile.
    conn.execute("BEGIN IMMEDIATE")
    try:
        app, version = _versions(conn)
        if (app, version) != (_APPLICATION_ID, _VERSION):
            if app == _APPLICATION_ID and version > _VERSION:
                msg = f"a newer release's sidecar (version {version})"
                raise Unusable(msg)
            if (app, version) != (0, 0) or conn.execute(
                    "SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None:
                msg = f"not a projection sidecar (application id {app:#x})"
                raise Foreign(msg)
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id={_APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")
        raise
    conn.execute("PRAGMA synchronous=NORMAL")
    return True


def remove_damaged(folder: str, path: str, file: tuple[int, int] | None) -> None:
    """Remove the damaged database ``file`` (its identity) at ``path``, and its WAL
    files, unless another writer replaced it meanwhile: under a lock on the folder, so
    that two writers meeting the damage do not remove each other's new file. Best
    effort: the next write tries again."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if file is None or identity(path) != file:
            return  # replaced already: the new one is good
        for suffix in ("-wal", "-shm", "-journal", ""):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path + suffix)
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)  # unlocks
