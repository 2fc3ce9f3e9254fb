"""The system calls of the JSONL backend's file layer.

Whole-file and first-line reads, writes that are all-or-nothing, ``mkdir -p`` with
private modes, directory fsyncs, and opening a file for writing never through a
symbolic link.

The file locks JSONL shares with SQLite's lock files are :mod:`~.file_locks`'. What a
log's bytes mean is :mod:`dsh_session_core._logformat.logfile`'s (the format); where a log
lives is :mod:`.paths`'; what a store's folder holds (its kind, its buckets' logs, the
temp files of killed first writes) is :mod:`.buckets`'. Reading a log file from its
end, and following it, is the log-format side's (:mod:`dsh_session_core._logformat.tail`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import BinaryIO, Final

from ...._logformat.logfile import last_lines, line_wire
from ....errors import LinkedLogError

__all__ = [
    "check_bucket",
    "cut",
    "exists",
    "first_line",
    "fsync_dir",
    "last_seq",
    "link_target",
    "make_bucket",
    "mkdirs",
    "open_nofollow",
    "read_if_exists",
    "seq_before",
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


def make_bucket(path: str) -> None:
    """Make a bucket (mode 0700) in a store's folder, which exists: one level, never the
    folders above it (a store's folder removed under a writer is not made again)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def unlink_quietly(path: str) -> None:
    # Best effort: a leftover .tmp is ignored by list() and by loads.
    with contextlib.suppress(OSError):
        os.unlink(path)


def seq_before(path: str, end: int) -> int | None:
    """The seq of the last line of the file's first ``end`` bytes; ``-1`` when that is
    the header; ``None`` when byte ``end - 1`` is no newline or the line holds no seq
    (the file is not cut there at a line's end)."""
    if end <= 0:
        return None
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
        return last_seq(f, end)


def last_seq(f: BinaryIO, end: int) -> int | None:
    """:func:`seq_before` of an open log (a compact log's decoded bytes, in memory)."""
    if end <= 0:
        return None
    f.seek(end - 1)
    if f.read(1) != b"\n":
        return None
    lines = last_lines(f, end, 1)
    if not lines:
        return -1
    wire = line_wire(lines[0])
    seq = None if wire is None else wire.get("seq")
    return seq if type(seq) is int else None


# --- links and names ----------------------------------------------------------------------


def link_target(path: str) -> str | None:
    """Where a symbolic link points, or ``None`` when it cannot be read."""
    try:
        return os.readlink(path)
    except OSError:
        return None


def check_bucket(root: str, session_id: str, bucket: str) -> None:
    """Refuse a bucket folder (``<root>/<name>``) that is a symbolic link: a write into it
    could land out of the store. The root itself may be a link. One ``lstat``: a bucket
    is one name in the root, so it resolves to the root's own folder exactly when that
    name is no link (a missing bucket is left for the open to report).

    :raises LinkedLogError: it is.
    """
    if os.path.dirname(bucket) != root:  # not one name in the root: resolve both
        if os.path.realpath(bucket) != os.path.join(os.path.realpath(root),
                                                     os.path.basename(bucket)):
            raise LinkedLogError(session_id, bucket, link_target(bucket))
        return
    try:
        found = os.lstat(bucket)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(found.st_mode):
        raise LinkedLogError(session_id, bucket, link_target(bucket))


def open_nofollow(root: str, session_id: str, path: str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` of a file in a bucket of ``root`` for writing, never through a link:
    neither the file (``O_NOFOLLOW``) nor its bucket may be one.

    :raises LinkedLogError: one is.
    """
    check_bucket(root, session_id, os.path.dirname(path))
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise LinkedLogError(session_id, path, link_target(path)) from exc
        raise


def exists(path: str) -> bool:
    try:
        os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
