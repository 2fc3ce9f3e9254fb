"""Writer locks on lock files, as the JSONL and SQLite backends take them.

An exclusive ``flock`` taken without waiting, tested without creating anything, and
checked to be on the file still at the path (a delete unlinks a lock file while holding
it).
"""

from __future__ import annotations

import fcntl
import os

from ..errors import SessionLockedError

__all__ = ["lock_is_free", "lock_or_close", "same_file"]


def lock_is_free(path: str) -> bool:
    """Whether nobody holds the ``flock`` of a lock file, tested without waiting and
    without creating anything: a missing file is free (every writer creates it before
    locking it). The lock is taken and released at once when it is free."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # unlocks
    return True


def lock_or_close(fd: int, session_id: str, path: str) -> None:
    """Take the writer lock: an exclusive ``flock`` of the open lock file ``fd`` (at
    ``path``), without waiting. On any failure ``fd`` is closed, so that a refused writer
    holds nothing open.

    :raises SessionLockedError: another writer holds the lock.
    """
    try:
        # flock, not fcntl/lockf: its locks belong to the open file description, so a
        # second open of the file in this very process conflicts too.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SessionLockedError(session_id, f"lock {path}") from None
    except BaseException:
        os.close(fd)
        raise


def same_file(fd: int, path: str) -> bool:
    """Whether the open file ``fd`` is still the one at ``path`` (not unlinked or
    replaced since it was opened). A writer lock taken on a lock file that a delete
    unlinked meanwhile locks nothing anyone else will see: the lock must be taken again
    on the file now at the path."""
    try:
        there = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
