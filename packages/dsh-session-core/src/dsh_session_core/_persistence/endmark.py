"""The durable-end mark of a JSONL log: where its history ends when a failed write could
not be rolled back (issue 24, point 10).

A flush appends a batch and fsyncs; when either fails, the log is cut back to the size
it had (:meth:`~.jsonl.JsonlBackend._append`). When that cut fails too, the failed
batch's bytes stay at the log's end, and they may be whole, valid lines (or, in a
compact log, whole zstd frames): no reader could tell them from history. So the writer
leaves, beside the log, a small file saying how long the log's history is, before the
flush raises: ``<log file name>.durable`` (``s.jsonl.durable``, ``s.jsonl.zst.durable``)
holding that byte count in decimal and a newline. The log itself stays in the
reference's format, byte for byte; the reference lists ``*.jsonl`` files only, and
never sees the mark.

Every reader of a log reads the mark first, then the log, and stops at the mark: a
load, ``tail``, ``read``, the counts of ``ls``, a search, ``copy``, ``export``, a
follower. Read in that order, a writer that cuts the log, removes the mark and appends
again meanwhile leaves the reader a prefix of the history, never the failed bytes.

The byte count is the size the log had before the failed batch, known durable (its last
write was fsynced), so the mark never cuts history. It goes away when the bytes after it
are gone: the next write cuts the log back to it and removes it (both durably) before
appending; so does the repair of a load that finds it. A cut log and no mark, or a mark
and a longer log, are both consistent states; a write after the mark is never made
while the mark stands.

The mark is written as a temp file (``<mark>.part``, fixed: only the holder of the
session's writer lock writes it), fsynced, renamed into place, and the bucket fsynced.
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

from ..errors import LogFormatError

__all__ = ["SUFFIX", "durable_end", "mark_files", "mark_of", "remove_mark", "within",
           "write_mark"]

#: How a log's mark is named: the log's file name and this.
SUFFIX: Final = ".durable"

#: The longest mark read (a byte count of 19 digits and a newline, and room to see more).
_MAX: Final = 32


def mark_of(path: str) -> str:
    """The mark of the log at ``path``."""
    return path + SUFFIX


def mark_files(path: str) -> list[str]:
    """The mark of the log at ``path`` and its temp file, those that exist."""
    mark = mark_of(path)
    return [name for name in (mark, mark + ".part")
            if os.path.lexists(name)]


def durable_end(path: str) -> int | None:
    """The byte count the mark of the log at ``path`` holds: the log's history ends
    there; ``None`` when the log has no mark (all of its complete lines are history).

    :raises LogFormatError: the mark holds no byte count (edited by hand).
    """
    mark = mark_of(path)
    try:  # read as the log is (files.read_if_exists)
        f = open(mark, "rb", buffering=0)  # noqa: SIM115 - closed right below
    except (FileNotFoundError, NotADirectoryError):
        return None
    with f:
        text = f.read(_MAX)
    digits = text[:-1]
    if not (text.endswith(b"\n") and digits.isdigit() and len(digits) < 20):
        msg = (f"{mark} should hold the byte count where the log's history ends (a write "
               f"that failed left it), and holds {text!r}: cut {path} to its last line you "
               f"know was written, then remove {mark}")
        raise LogFormatError(msg, path=mark, line=1)
    return int(digits)


def within(size: int, end: int | None) -> int:
    """How much of a log ``size`` bytes long is history, when :func:`durable_end` (read
    before the size) said ``end``."""
    return size if end is None else min(size, end)


def write_mark(path: str, size: int) -> None:
    """Mark ``size`` as the end of the history of the log at ``path``, durably: written
    to the temp file, fsynced, renamed into place, the bucket fsynced. The caller holds
    the session's writer lock (and has checked its bucket is no link).

    :raises OSError: a step failed (the mark may then be in place without being
        durable; the temp file is removed when it can be).
    """
    from .files import fsync_dir, write_all

    mark = mark_of(path)
    temp = mark + ".part"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, b"%d\n" % size)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, mark)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(os.path.dirname(path))


def remove_mark(path: str) -> None:
    """Remove the mark of the log at ``path`` (and a temp file a failed marking left),
    durably: the bucket is fsynced when anything was removed. Only once the log holds
    nothing after the mark (the caller cut it there), under the writer lock.

    :raises OSError: a removal, or the fsync, failed (the mark may still stand).
    """
    from .files import fsync_dir

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
        fsync_dir(os.path.dirname(path))
