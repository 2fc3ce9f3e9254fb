"""What a JSONL backend keeps of the logs it writes between two calls.

Their append descriptors, left open, and how each log ended after its last durable
write.

Reopening a log for every batch costs more than the write, so a backend keeps up to
:data:`MAX_OPEN_LOGS` append descriptors open (least recently used closed first), each
checked out while a write uses it, so that evicting one never closes a descriptor
another thread is writing to. And reading a log's end to tell whether someone else
wrote to it costs more than a ``stat`` and a small ``pread``: the backend remembers, for
up to :data:`MAX_KNOWN_ENDS` logs, the file, its size and the bytes it ended with
(:class:`Known`); a log still so is a log no one wrote to since
(:meth:`~.jsonl.backend.JsonlBackend.lines_since`). A forgotten one is read from its file.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Final, NamedTuple

from . import files

__all__ = ["MAX_KNOWN_ENDS", "MAX_OPEN_LOGS", "MAX_TAIL", "Known", "OpenLogs", "last_line"]

#: How many append descriptors stay open between batches (least recently used go first);
#: the writer lock's released descriptors are kept as many (:mod:`.jsonl.lock`).
MAX_OPEN_LOGS: Final = 128
#: How many logs' ends a backend remembers (least recently written go first: a
#: forgotten one's ``lines_since`` reads the file's end instead). An end holds a last
#: line of up to :data:`MAX_TAIL` bytes, so a process writing many sessions is bounded.
MAX_KNOWN_ENDS: Final = 1024
#: The longest end of a batch remembered to compare with the file (:class:`Known`): a
#: longer last line (or compact frame) leaves the next ``lines_since`` to read the file.
MAX_TAIL: Final = 65536


class Known(NamedTuple):
    """What a backend last wrote at the end of a log: the file (``dev``, ``ino``), its
    size then, the bytes it ends with (``tail``: as written) and its last line (plain,
    without its newline)."""

    dev: int
    ino: int
    size: int
    tail: bytes
    line: bytes


def last_line(plain: bytes) -> bytes:
    """The last line of ``plain`` (lines each ``\\n``-ended), without its newline."""
    return plain[plain.rfind(b"\n", 0, len(plain) - 1) + 1:-1]


class OpenLogs:
    """A backend's append descriptors and the ends of the logs it wrote (see the module
    docstring), keyed by log path. Safe to use from several threads."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        # Checked out (popped) while in use: see the module docstring.
        self._fds: dict[str, int] = {}
        # How each log this backend wrote ended then: a log in it is there (the lock's
        # release needs no stat to tell).
        self._known: dict[str, Known] = {}

    def checkout(self, root: str, session_id: str, path: str) -> int:
        """The log's append descriptor, taken out until :meth:`checkin` (opened now when
        none is kept).

        :raises LinkedLogError: the log or its bucket is a symbolic link.
        :raises OSError: the log cannot be opened (a vanished one is not made again).
        """
        with self._mutex:
            fd = self._fds.pop(path, None)
        if fd is None:
            # No O_CREAT: a materialized log that vanished is an error, not a new
            # header-less file. Never through a link (files.open_nofollow).
            # Read-write: lines_since reads the log's end through it (unchanged).
            fd = files.open_nofollow(root, session_id, path,
                                     os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        return fd

    def checkin(self, path: str, fd: int) -> None:
        """Keep ``fd`` as the log's append descriptor, closing the least recently used
        beyond :data:`MAX_OPEN_LOGS` (and one kept for the path meanwhile)."""
        evicted: list[int] = []
        with self._mutex:
            old = self._fds.pop(path, None)
            if old is not None:
                evicted.append(old)
            self._fds[path] = fd
            while len(self._fds) > MAX_OPEN_LOGS:
                oldest = next(iter(self._fds))
                evicted.append(self._fds.pop(oldest))
        for stale in evicted:
            # Called once a write is durable: an error closing a descriptor whose data
            # was fsynced must not turn it into a failed write (its retry would write
            # the same seqs again).
            with contextlib.suppress(OSError):
                os.close(stale)

    def remember(self, path: str, known: Known) -> None:
        """Note how a durable write left the log, as the most recent, forgetting the
        least recently written beyond :data:`MAX_KNOWN_ENDS`."""
        with self._mutex:
            self._known.pop(path, None)  # the most recent last
            self._known[path] = known
            while len(self._known) > MAX_KNOWN_ENDS:  # forgotten: read from the file
                del self._known[next(iter(self._known))]

    def unknown(self, path: str) -> None:
        """Forget the log's end: a write is under way (until it is durable, the log's
        end is not what was known)."""
        with self._mutex:
            self._known.pop(path, None)

    def known(self, path: str) -> Known | None:
        """How this backend's last durable write left the log, if it remembers."""
        with self._mutex:
            return self._known.get(path)

    def knows(self, path: str) -> bool:
        """Whether this backend saw the log there at the lock's acquire, or wrote it."""
        with self._mutex:
            return path in self._known

    def remembered(self) -> int:
        """How many logs' ends are remembered."""
        with self._mutex:
            return len(self._known)

    def unchanged(self, path: str, known: Known) -> bool:
        """Whether the log at ``path`` is still the file, the size and the end ``known``
        says (read through its append descriptor, opened to read too)."""
        with self._mutex:
            fd = self._fds.pop(path, None)
        if fd is None:
            return False
        try:
            there = os.stat(path, follow_symlinks=False)
            if ((there.st_dev, there.st_ino, there.st_size)
                    != (known.dev, known.ino, known.size)):
                return False
            n = len(known.tail)
            return n <= known.size and os.pread(fd, n, known.size - n) == known.tail
        except FileNotFoundError:
            return False
        finally:
            self.checkin(path, fd)

    def check(self, path: str, found: os.stat_result | None) -> None:
        """Just after taking the session's lock: forget the append descriptor and the
        known end of a log that is no longer the file they are of (``found``: the log's
        ``lstat``, ``None`` when it is gone). Another process may have deleted the
        session and made it anew since this backend wrote it; a write through the old
        descriptor would land in the removed file."""
        with self._mutex:
            known = self._known.get(path)
            fd = self._fds.get(path)
        if known is None and fd is None:
            return
        if known is not None:
            was = (known.dev, known.ino)
        else:
            assert fd is not None
            st = os.fstat(fd)
            was = (st.st_dev, st.st_ino)
        if found is not None and (found.st_dev, found.st_ino) == was:
            return
        self.forget(path)

    def forget(self, path: str) -> None:
        """Drop the log's descriptor (closed) and its end: it is being removed, or is
        no longer the file they were of."""
        with self._mutex:
            self._known.pop(path, None)
            fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Close every kept descriptor and forget every end."""
        with self._mutex:
            fds = list(self._fds.values())
            self._fds.clear()
            self._known.clear()
        for fd in fds:
            os.close(fd)
