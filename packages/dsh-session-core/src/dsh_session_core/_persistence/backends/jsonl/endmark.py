"""The JSONL writer's side of the durable-end mark: writing it, and removing it.

It is written after a failed write that could not be rolled back, and removed once the
log is cut back to it.

What the mark is, and how every reader reads it, is :mod:`dsh_session_core._logformat.end`'s
(the log-format side). The byte count written is the size the log had before the failed
batch, known durable (its last write was fsynced), so the mark never cuts history. It
goes away when the bytes after it are gone: the next write cuts the log back to it and
removes it (both durably) before appending; so does the repair of a load that finds it.
A cut log and no mark, or a mark and a longer log, are both consistent states; a write
after the mark is never made while the mark stands.

The mark is written as a temp file (``<mark>.part``, fixed: only the holder of the
session's writer lock writes it), fsynced, renamed into place, and the bucket fsynced.
"""

from __future__ import annotations

import contextlib
import os

from ...._logformat.end import mark_of
from . import files

__all__ = ["mark_files", "remove_mark", "write_mark"]


def mark_files(path: str) -> list[str]:
    """The mark of the log at ``path`` and its temp file, those that exist."""
    mark = mark_of(path)
    return [name for name in (mark, mark + ".part")
            if os.path.lexists(name)]


def write_mark(path: str, size: int) -> None:
    """Mark ``size`` as the end of the history of the log at ``path``, durably: written
    to the temp file, fsynced, renamed into place, the bucket fsynced. The caller holds
    the session's writer lock (and has checked its bucket is no link).

    :raises OSError: a step failed (the mark may then be in place without being
        durable; the temp file is removed when it can be).
    """
    mark = mark_of(path)
    temp = mark + ".part"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            files.write_all(fd, b"%d\n" % size)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, mark)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    files.fsync_dir(os.path.dirname(path))


def remove_mark(path: str) -> None:
    """Remove the mark of the log at ``path`` (and a temp file a failed marking left),
    durably: the bucket is fsynced when anything was removed. Only once the log holds
    nothing after the mark (the caller cut it there), under the writer lock.

    :raises OSError: a removal, or the fsync, failed (the mark may still stand).
    """
    mark = mark_of(path)
    removed = False
    for name in (mark + ".part", mark):  # the mark last: it stands until the end
        # A stat first: almost always there is none, and a first write or a repair
        # checks for one (only the writer lock's holder makes one).
        if not os.path.lexists(name):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        removed = True
    if removed:
        files.fsync_dir(os.path.dirname(path))
