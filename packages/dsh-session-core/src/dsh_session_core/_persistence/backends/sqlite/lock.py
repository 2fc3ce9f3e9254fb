"""The SQLite backend's writer locks: an ``flock`` held on a file per session.

The file is beside the database (``<database>.locks/<sha256 of the id>.lock``), and the
kernel releases the lock when the holding process dies; a set of ids for a ``:memory:``
database; and the error of a batch another writer stored first.
:meth:`~.sqlite.backend.SqliteBackend.acquire` takes them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
from collections.abc import Callable
from typing import Final

from ....errors import PersistenceError
from ...file_locks import same_file

__all__ = ["LOCK_ATTEMPTS", "FileLock", "MemoryLock", "clash", "lock_path"]

#: How many times a lock file that a delete removed while it was being locked is
#: taken again (once is all a delete makes it need).
LOCK_ATTEMPTS: Final = 8


def clash(session_id: str, first: int, materialized: bool) -> PersistenceError:
    """The error of a batch whose seqs another writer stored first."""
    if not materialized:
        msg = (f'session "{session_id}" was created by another writer at the same time '
               f"(its log already holds seq {first}): nothing of this batch was written; "
               f"open the session to continue it, or create another id")
    else:
        msg = (f'session "{session_id}" was written by another writer: seq {first} is '
               f"already stored; nothing of this batch was written; reopen the session to "
               f"continue from what is stored")
    return PersistenceError(msg, session_id=session_id)


@functools.lru_cache(maxsize=256)
def lock_path(lock_dir: str, session_id: str) -> str:
    """``<lock_dir>/<sha256 of the id>.lock``, kept for the sessions used most recently:
    the default mode takes the same session's lock on every call."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return os.path.join(lock_dir, f"{digest}.lock")


class FileLock:
    """An ``flock`` held on an open descriptor: closing it (or dying) releases it.

    :param stored: whether the session has a row; when it has none at release (created
        and never flushed), the lock file is removed first, while held, as
        :meth:`~.sqlite.backend.SqliteBackend.delete` removes it (a writer that opened
        it meanwhile locks a dead file, sees it and makes a new one): nothing is left
        for a session that was never stored.
    """

    __slots__ = ("_fd", "_guard", "_owner", "_path", "_stored")

    def __init__(self, fd: int, owner: set[FileLock], path: str,
                 stored: Callable[[], bool]) -> None:
        self._fd = fd
        self._owner = owner
        self._path = path
        self._stored = stored
        self._guard = threading.Lock()

    def release(self) -> None:
        with self._guard:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            self._owner.discard(self)
            try:
                if not self._stored() and same_file(fd, self._path):
                    with contextlib.suppress(OSError):  # a lock file left is harmless
                        os.unlink(self._path)
            finally:
                os.close(fd)  # the lock goes with the open file description


class MemoryLock:
    """A lock on a ``:memory:`` database, which no other connection can open."""

    __slots__ = ("_held", "_id")

    def __init__(self, held: set[str], session_id: str) -> None:
        self._held = held
        self._id = session_id

    def release(self) -> None:
        self._held.discard(self._id)
