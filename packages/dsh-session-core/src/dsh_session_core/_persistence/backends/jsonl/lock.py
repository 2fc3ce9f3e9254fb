"""The JSONL backend's writer lock: an exclusive ``flock`` on a ``.lock`` file beside the log.

It keeps two writers (two processes, or two backends in one process) from interleaving
appends to one session.

Beyond the reference. The lock file is created on demand and deleted only by a delete
(while it holds the lock) or by the release of a session that has no log (made, never
flushed), while still holding it. A writer that opened it before that and locks it
after locks an unlinked file: the lock is then checked to be on the file at the path
(:func:`~.file_locks.same_file`), and taken again on the new one when it is not, so two
writers never both hold a session. A released lock's descriptor is kept open, unlocked,
for the next acquire of the session (an unlocked descriptor keeps no one out: ``flock``
excludes only holders).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
from collections.abc import Callable
from typing import Final

from ....errors import LinkedLogError
from ... import file_locks
from ...base import SessionLockedError
from . import ends as jsonl_ends
from . import files
from .buckets import make_store_folder, sweep_temps
from .ends import OpenLogs
from .paths import encode_segment

__all__ = ["FileLock", "WriterLocks"]

#: How many times :meth:`WriterLocks.acquire` takes a lock file again that a delete
#: removed while it was being locked (once is all a delete makes it need).
_LOCK_ATTEMPTS: Final = 8


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


class FileLock:
    """A held ``flock`` on a session's ``.lock`` file; released by :meth:`release`, by
    closing the backend, or by the death of the process. ``dev`` and ``ino`` are the lock
    file's (what :meth:`WriterLocks.acquire` checks the file at the path against when it
    takes the lock again on this descriptor)."""

    __slots__ = ("_fd", "_locks", "dev", "ino", "log", "path", "swept")

    def __init__(self, fd: int, path: str, log: str, locks: WriterLocks,
                 dev: int, ino: int) -> None:
        self._fd = fd
        self.path = path
        self.log = log
        self._locks = locks
        self.dev = dev
        self.ino = ino
        #: The session's dead temp files that taking the lock removed, with their sizes
        #: (a delete under this lock names them among what it removed).
        self.swept: dict[str, int] = {}

    def release(self) -> None:
        """Unlock; a second call does nothing. When the session has no log (created and
        never flushed, or its first write failed), the lock file is removed first, while
        held, as a delete removes it: a writer that opened it meanwhile locks a dead
        file, sees it (``acquire`` checks) and makes a new one, so two writers never both
        hold the session.

        Otherwise the descriptor stays open, unlocked, for the backend's next acquire of
        the session."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        locks = self._locks
        locks.forget(self)
        try:
            # The log is known to be there when the backend saw it at the acquire or
            # wrote it since (OpenLogs.knows): no stat needed.
            if not locks.logs.knows(self.log) and not files.exists(self.log):
                if file_locks.same_file(fd, self.path):
                    files.unlink_quietly(self.path)  # best effort: a lock file left is harmless
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                return
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)  # closing the last descriptor would release it anyway
            raise
        locks.park(self.path, fd, self.dev, self.ino)

    def __repr__(self) -> str:
        state = "held" if self._fd >= 0 else "released"
        return f"<session writer lock {self.path} ({state})>"


class WriterLocks:
    """The writer locks of one backend: those held, and the released ones' descriptors
    kept open (see the module docstring).

    :param root: the store's folder.
    :param logs: the backend's append descriptors and known ends (checked when a lock is
        taken: :meth:`~.ends.OpenLogs.check`).
    :param prepare_root: called before a bucket is made in the root (a compact store
        marks its root first).
    """

    def __init__(self, root: str, logs: OpenLogs, prepare_root: Callable[[], None]) -> None:
        self.root = root
        self.logs = logs
        self._prepare_root = prepare_root
        self._mutex = threading.Lock()
        self._held: set[FileLock] = set()
        # Buckets swept of the temp files of killed first writes (once per backend).
        self._swept: set[str] = set()
        # Lock files released and kept open, unlocked (lock path: descriptor and the
        # file's dev and ino), least recently used first: taking the lock again is a
        # flock and a stat, not a mkdir, an open and a walk of the path.
        self._idle: dict[str, tuple[int, int, int]] = {}

    def acquire(self, session_id: str, path: str, log: str) -> FileLock:
        """Take the lock of the session whose lock file is ``path`` and log ``log``,
        without waiting. Every lock file is opened by its own descriptor, so two backends
        in one process exclude each other too (flock locks belong to open file
        descriptions).

        A kept descriptor is locked again after one ``stat`` each checks that the lock
        file at the path is still the one it opened, that the bucket is no link and the
        log none either; when one is not so, the lock is taken as the first time.

        :raises SessionLockedError: another writer holds it.
        :raises LinkedLogError: the bucket, the lock file or the log is a symbolic link.
        """
        with self._mutex:
            idle = self._idle.pop(path, None)
        if idle is not None:
            lock = self._relock(session_id, path, log, *idle)
            if lock is not None:
                return lock
        bucket = os.path.dirname(path)
        fd = -1
        for _ in range(_LOCK_ATTEMPTS):
            make_store_folder(self.root)
            self._prepare_root()
            files.make_bucket(bucket)
            # The lock is taken to write: refuse now, not at the first write, a bucket,
            # a lock or a log that is a symbolic link (files.open_nofollow).
            fd = files.open_nofollow(self.root, session_id, path,
                                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            if os.path.islink(log):
                os.close(fd)
                raise LinkedLogError(session_id, log, files.link_target(log))
            file_locks.lock_or_close(fd, session_id, path)
            here = os.fstat(fd)
            try:
                there = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                there = None
            if there is not None and (here.st_dev, here.st_ino) == (there.st_dev,
                                                                     there.st_ino):
                break
            # A delete unlinked this lock file between our open and our flock: the lock
            # taken is on a file nobody else will open. Take the one at the path now.
            os.close(fd)
            fd = -1
        if fd < 0:
            raise SessionLockedError(session_id, f"lock {path} (removed under us, again and "
                                                 f"again: a delete loop?)")
        try:
            self.logs.check(log, _lstat(log))
        except BaseException:
            os.close(fd)
            raise
        lock = FileLock(fd, path, log, self, here.st_dev, here.st_ino)
        with self._mutex:
            self._held.add(lock)
            sweep = bucket not in self._swept
            self._swept.add(bucket)
        # Holding this session's lock, its own leftover temp files are dead; the other
        # sessions' ones are removed only under their locks (buckets.sweep_temps).
        if sweep:
            lock.swept = sweep_temps(bucket, encode_segment(session_id))
        return lock

    def _relock(self, session_id: str, path: str, log: str, fd: int, dev: int,
                ino: int) -> FileLock | None:
        """:meth:`acquire` on a kept descriptor of the lock file (``dev``, ``ino``):
        ``None`` (the descriptor closed) when the lock must be taken as the first time:
        the lock file at the path is another one (a delete removed it), or the bucket
        is not what it was.

        :raises SessionLockedError: another writer holds it (the descriptor is kept).
        :raises LinkedLogError: the log is a symbolic link.
        """
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.park(path, fd, dev, ino)
            raise SessionLockedError(session_id, f"lock {path}") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            there = os.stat(path, follow_symlinks=False)
            # The lock file is in the bucket, so the bucket is there; a bucket that
            # became a link is refused by the first time's path (files.check_bucket).
            usable = ((there.st_dev, there.st_ino) == (dev, ino)
                      and not stat.S_ISLNK(os.lstat(os.path.dirname(path)).st_mode))
            if usable:
                found = _lstat(log)
                if found is not None and stat.S_ISLNK(found.st_mode):
                    raise LinkedLogError(session_id, log, files.link_target(log))
                self.logs.check(log, found)
        except FileNotFoundError:
            usable = False
        except BaseException:
            os.close(fd)  # unlocks
            raise
        if not usable:
            os.close(fd)  # unlocks
            return None
        lock = FileLock(fd, path, log, self, dev, ino)
        with self._mutex:
            self._held.add(lock)
        return lock

    def forget(self, lock: FileLock) -> None:
        """``lock`` is no longer held."""
        with self._mutex:
            self._held.discard(lock)

    def park(self, path: str, fd: int, dev: int, ino: int) -> None:
        """Keep a released lock file's descriptor (unlocked) for the next acquire, as many
        as :data:`~.ends.MAX_OPEN_LOGS` (least recently used closed first)."""
        evicted: list[int] = []
        with self._mutex:
            old = self._idle.pop(path, None)
            if old is not None:
                evicted.append(old[0])
            self._idle[path] = (fd, dev, ino)
            while len(self._idle) > jsonl_ends.MAX_OPEN_LOGS:
                evicted.append(self._idle.pop(next(iter(self._idle)))[0])
        for stale in evicted:
            with contextlib.suppress(OSError):
                os.close(stale)  # unlocked: closing it releases nothing

    def close(self) -> None:
        """Release the locks still held, then close every kept descriptor."""
        with self._mutex:
            held = list(self._held)
        for lock in held:
            lock.release()
        with self._mutex:
            fds = [fd for fd, _, _ in self._idle.values()]
            self._idle.clear()
        for fd in fds:
            os.close(fd)
