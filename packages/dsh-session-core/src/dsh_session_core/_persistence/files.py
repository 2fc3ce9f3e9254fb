"""The file system side of the JSONL backend: reading and writing log files durably,
finding them in a store's buckets, and following one as it grows.

What a log's bytes mean is :mod:`dsh_session_core._logfile`'s (the format); where a log
lives is :mod:`.paths`'; this module does the system calls: whole-file and first-line
reads, writes that are all-or-nothing, ``mkdir -p`` with private modes, directory
fsyncs, and the polling follower behind ``tail -f``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import time
from collections.abc import Iterator
from typing import Final

from .._header import SessionHeader
from .._logfile import complete_end, header_or_none, last_lines
from .base import POLL_SECONDS, LogNews, LogTail
from .paths import encode_segment

__all__ = [
    "FilePosition",
    "cut",
    "exists",
    "find_log",
    "first_line",
    "follow_file",
    "fsync_dir",
    "list_logs",
    "mkdirs",
    "read_if_exists",
    "tail_file",
    "unlink_quietly",
    "write_all",
]

#: ``list()`` reads first lines in chunks of this size, as the reference does.
_CHUNK: Final = 8192


# --- reading ----------------------------------------------------------------------------


def read_if_exists(path: str) -> bytes | None:
    """The file's bytes, or ``None`` when it does not exist. Only ENOENT means absent:
    a permission error, or a bucket that is a file (ENOTDIR), propagates (spec §14.23)."""
    try:
        f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed right below
    except FileNotFoundError:
        return None
    with f:
        return f.readall()


def first_line(path: str) -> bytes | None:
    """The file's first ``\\n``-ended line (without it), read in 8 KiB chunks; ``None``
    when it has none (or vanished meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, _CHUNK):
            nl = chunk.find(b"\n")
            if nl >= 0:
                chunks.append(chunk[:nl])
                return b"".join(chunks)
            chunks.append(chunk)
        return None
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte (``os.write`` may write fewer than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # never for a regular file; guards against spinning forever
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def cut(fd: int, size: int) -> OSError | None:
    """Truncate to ``size`` and fsync; the error, if that failed too."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError as exc:
        return exc
    return None


def fsync_dir(path: str) -> None:
    """Make a directory's entries (a new file, a new subdirectory) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mkdirs(path: str) -> None:
    """``mkdir -p`` with mode 0700 for every directory it creates (``os.makedirs``
    applies the mode to the leaf only)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if parent == path:
            raise
        mkdirs(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # created concurrently
            if not os.path.isdir(path):
                raise


def unlink_quietly(path: str) -> None:
    # Best effort: a leftover .tmp is ignored by list() and by loads.
    with contextlib.suppress(OSError):
        os.unlink(path)


def exists(path: str) -> bool:
    try:
        os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def list_logs(root: str) -> list[tuple[SessionHeader, str]]:
    """Every ``*.jsonl`` log under a store's root, with its header read from its first
    line only; files without a complete, valid header line are skipped. No order.

    :raises OSError: the root cannot be listed (a missing root lists nothing).
    """
    try:
        buckets = os.scandir(root)
    except FileNotFoundError:
        return []
    found: list[tuple[SessionHeader, str]] = []
    with buckets:
        for bucket in buckets:
            if not bucket.is_dir():
                continue
            try:
                files = os.scandir(bucket.path)
            except FileNotFoundError:  # removed meanwhile
                continue
            with files:
                for entry in files:
                    if not entry.name.endswith(".jsonl") or not entry.is_file():
                        continue
                    line = first_line(entry.path)
                    header = None if line is None else header_or_none(line)
                    if header is not None:
                        found.append((header, entry.path))
    return found




def find_log(root: str, session_id: str) -> str | None:
    """The log file of a session in a store (any bucket, in directory order, as
    ``load_stored`` finds it); ``None`` when there is none."""
    try:
        name = encode_segment(session_id) + ".jsonl"
        buckets = os.scandir(root)
    except (FileNotFoundError, ValueError):
        return None
    with buckets:
        for bucket in buckets:
            path = os.path.join(bucket.path, name)
            if bucket.is_dir() and os.path.isfile(path):
                return path
    return None


# --- following --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class FilePosition:
    """Where a follower of a log file stands (a :class:`LogTail` position).

    :ivar path: the log file.
    :ivar offset: just past the last complete line reported; 0 when none was (the first
        line to arrive is then the header, never reported).
    """

    path: str
    offset: int


def tail_file(path: str, count: int) -> LogTail:
    """The last ``count`` complete event lines of a log file, read from its end; a torn
    last line is left for the follower.

    :raises OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        offset = complete_end(f, os.fstat(f.fileno()).st_size)
        lines = last_lines(f, offset, count)
    return LogTail(lines, FilePosition(path, offset))


def follow_file(
    position: object, *, timeout: float | None = None, poll: float = POLL_SECONDS
) -> Iterator[LogNews]:
    """Follow a log file from ``position``: yield its new *complete* lines as they arrive
    (a torn last line is reported once its newline arrives).

    Polls, since a follower legitimately waits for data: every ``poll`` seconds it
    compares the file's size with what it has read, a ``stat`` costing microseconds.
    When the file shrinks (``repair`` cut a torn tail), a news item with no line says so
    and following goes on from the new end; when it was cut and regrew between two polls
    (the byte before the position is no longer a newline), from the start of the line
    now there. With ``timeout``, stops after that many seconds without news.

    :param position: a :class:`FilePosition` (of :func:`tail_file`, or of the last news).
    :raises OSError: the file cannot be opened.
    """
    if not isinstance(position, FilePosition):
        msg = f"a log file's position is a FilePosition, got {position!r}"
        raise TypeError(msg)
    path, offset = position.path, position.offset
    # Without a complete line yet, the first line to arrive is the header.
    header_pending = offset == 0
    with open(path, "rb") as f:
        fd = f.fileno()
        quiet_since = time.monotonic()
        while True:
            size = os.fstat(fd).st_size
            if size < offset:
                offset = complete_end(f, size)
                header_pending = offset == 0
                quiet_since = time.monotonic()
                yield LogNews([], FilePosition(path, offset),
                              f"the log was cut back to {size} bytes (a repair?); following "
                              f"from there")
                continue
            note = None
            if size > offset and offset and os.pread(fd, 1, offset - 1) != b"\n":
                # Cut and regrown between two polls: what we read up to is no longer a
                # line end. Go back to the start of the line that is there now.
                offset = complete_end(f, offset - 1)
                header_pending = offset == 0
                note = ("the log was rewritten under the follower; following from the "
                        "last complete line")
            f.seek(offset)
            chunk = f.read(size - offset) if size > offset else b""
            end = chunk.rfind(b"\n") + 1  # complete lines only: a torn line waits
            if end or note is not None:
                lines = chunk[: end - 1].split(b"\n") if end else []
                offset += end
                if header_pending and lines:
                    lines, header_pending = lines[1:], False
                quiet_since = time.monotonic()
                yield LogNews(lines, FilePosition(path, offset), note)
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            time.sleep(poll)
