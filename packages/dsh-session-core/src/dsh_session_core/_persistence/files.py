"""The file system side of the JSONL backend: reading and writing log files durably,
finding them in a store's buckets, and following one as it grows.

What a log's bytes mean is :mod:`dsh_session_core._logfile`'s (the format); where a log
lives is :mod:`.paths`'; this module does the system calls: whole-file and first-line
reads, writes that are all-or-nothing, ``mkdir -p`` with private modes, directory
fsyncs, the polling follower behind ``tail -f``, and the mark that tells a compact store
(``jsonl+zstd:``, :mod:`.jsonl_zstd`) from a plain one. Where a compact log's bytes differ
(its name, its first line, its complete lines), the functions take the difference as an
argument; the plain log's is the default.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO, Final, Protocol

from msgspec import UnsetType

from .._header import SessionHeader
from .._logfile import complete_end, durable_header, last_lines, line_wire
from ..errors import (
    LinkedLogError,
    LogFormatError,
    MisplacedLogError,
    SkippedLogWarning,
    StoreKindError,
)
from .base import POLL_SECONDS, LogNews, LogTail
from .endmark import durable_end, within
from .paths import encode_segment, log_path

__all__ = [
    "COMPACT_MARK",
    "COMPACT_SUFFIX",
    "LINES",
    "FilePosition",
    "Framing",
    "check_bucket",
    "check_kind",
    "check_placed",
    "cut",
    "exists",
    "find_log",
    "first_line",
    "follow_file",
    "fsync_dir",
    "last_seq",
    "link_target",
    "list_logs",
    "lock_is_free",
    "make_bucket",
    "mark_compact",
    "mkdirs",
    "open_nofollow",
    "read_if_exists",
    "same_file",
    "seq_before",
    "sweep_temps",
    "tail_file",
    "temps_of",
    "unlink_quietly",
    "write_all",
]

#: ``list()`` reads first lines in chunks of this size, as the reference does.
_CHUNK: Final = 8192

#: The temp file of a first write: ``<encoded id>.jsonl.<12 hex>.tmp`` (JsonlBackend, and
#: the compact backend too).
_TEMP = re.compile(r"(.+)\.jsonl\.[0-9a-f]{12}\.tmp")

#: The folder that marks a store's root as a compact store's (``jsonl+zstd:``). A folder,
#: not a file, for the reason the header cache's is one (:mod:`.header_cache`): the
#: reference takes every entry at a store's root for a bucket; this one it finds empty.
COMPACT_MARK: Final = ".jsonl-zstd"
#: How a compact log's file name ends (a plain one's ends ``.jsonl``).
COMPACT_SUFFIX: Final = ".jsonl.zst"


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


def check_placed(root: str, path: str, header: SessionHeader) -> None:
    """Refuse a log whose header is not the session its file name and bucket are for (a
    renamed or moved file): writing it would write elsewhere. The name's ending (a plain
    log's ``.jsonl``, a compact one's :data:`COMPACT_SUFFIX`) is the file's own.

    :raises MisplacedLogError: it is not.
    """
    cwd = None if isinstance(header.cwd, UnsetType) else header.cwd
    suffix = COMPACT_SUFFIX if path.endswith(COMPACT_SUFFIX) else ".jsonl"
    try:
        expected = log_path(root, cwd, header.id, suffix)
    except ValueError:  # no file name encodes this id (an empty one)
        expected = "(nowhere: the id is empty)"
    if expected != path:
        raise MisplacedLogError(path, header.id, expected)


def sweep_temps(bucket: str, held: str | None = None) -> None:
    """Remove the temp files killed first writes left in a bucket: the ones of session
    ``held`` (an encoded id whose writer lock the caller holds) at once; any other one
    only while holding its session's lock, taken here without waiting (a session being
    written by a live writer keeps its temp), and only when that lock file exists (every
    writer of ours creates it before its temp file). Best effort: any error leaves the
    file for the next sweep."""
    try:
        names = [entry.name for entry in os.scandir(bucket)]
    except OSError:
        return
    for name in names:
        match = _TEMP.fullmatch(name)
        if match is None:
            continue
        temp = os.path.join(bucket, name)
        if match[1] == held:
            unlink_quietly(temp)
            continue
        try:
            fd = os.open(os.path.join(bucket, match[1] + ".lock"),
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if not same_file(fd, os.path.join(bucket, match[1] + ".lock")):
            os.close(fd)  # a delete removed the lock file meanwhile: not ours to judge
            continue
        try:
            unlink_quietly(temp)
        finally:
            os.close(fd)  # unlocks


def temps_of(bucket: str, encoded: str) -> list[str]:
    """The temp files of killed first writes of one session (its encoded id) in a
    bucket: exactly its own (``<encoded>.jsonl.<12 hex>.tmp``), never those of an id it
    is a prefix of."""
    try:
        names = [entry.name for entry in os.scandir(bucket)]
    except OSError:
        return []
    return [os.path.join(bucket, name) for name in sorted(names)
            if (match := _TEMP.fullmatch(name)) is not None and match[1] == encoded]


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


def exists(path: str) -> bool:
    try:
        os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def check_kind(root: str, *, compact: bool) -> None:
    """Refuse to open a store folder as the other kind of JSONL store: a compact one
    (``jsonl+zstd:``) as plain, or a plain one as compact. A folder is compact when it
    holds the :data:`COMPACT_MARK` folder (made before any bucket: :func:`mark_compact`),
    plain when it holds a bucket and no mark; a folder that is missing or holds no bucket
    is either kind, until its first write.

    :raises StoreKindError: it is the other kind.
    """
    try:
        marked = os.path.isdir(os.path.join(root, COMPACT_MARK))
        if marked == compact or (compact and not _holds_bucket(root)):
            return
    except OSError:  # unreadable: the first real access says why
        return
    raise StoreKindError(root, "compact" if marked else "plain")


def _holds_bucket(root: str) -> bool:
    try:
        entries = os.scandir(root)
    except (FileNotFoundError, NotADirectoryError):
        return False
    with entries:
        # Buckets are _no-cwd and cwd-<hex>; the mark and the header cache start with ".".
        return any(not e.name.startswith(".") and e.is_dir() for e in entries)


def mark_compact(root: str) -> None:
    """Mark a store's root (made if missing, in a folder that exists) as a compact
    store's, durably, before its first bucket is made (:func:`check_kind`)."""
    from .urls import make_store_folder

    make_store_folder(root)
    mark = os.path.join(root, COMPACT_MARK)
    if os.path.isdir(mark):
        return
    with contextlib.suppress(FileExistsError):  # made meanwhile by another writer
        os.mkdir(mark, 0o700)
    fsync_dir(root)


def list_logs(
    root: str, suffix: str = ".jsonl",
    first: Callable[[str], bytes | None] | None = None,
) -> list[tuple[SessionHeader, str]]:
    """Every ``*.jsonl`` log under a store's root (every ``*<suffix>`` one), with its
    header read from its first line only (by ``first``, default :func:`first_line`: a
    compact log's first line is decoded); files without a complete first line are
    skipped (as the reference skips them), and a file whose complete first line is not
    a valid header, or whose header is for another file name or bucket
    (:func:`check_placed`), is skipped with a
    :class:`~dsh_session_core.errors.SkippedLogWarning`. No order. The temp files of
    killed first writes are swept meanwhile (:func:`sweep_temps`).

    A log that :mod:`.header_cache` holds, unchanged since (one ``stat``), is not opened:
    a listing of a large store costs a directory scan and a ``stat`` per log, plus the
    first lines of the logs new or written since the last listing.

    :raises OSError: the root cannot be listed (a missing root lists nothing).
    """
    from . import header_cache

    try:
        buckets = os.scandir(root)
    except FileNotFoundError:
        return []
    cache = header_cache.load(root)
    fresh: list[header_cache.Cached] = []
    read = 0  # logs whose first line was read: the cache is out of date
    found: list[tuple[SessionHeader, str]] = []
    with buckets:
        for bucket in buckets:
            if not bucket.is_dir():
                continue
            try:
                files = os.scandir(bucket.path)
            except FileNotFoundError:  # removed meanwhile
                continue
            temps = False
            bucket_name = bucket.name
            with files:
                for entry in files:
                    name = entry.name
                    if not name.endswith(suffix) or not entry.is_file():
                        temps = temps or name.endswith(".tmp")
                        continue
                    try:
                        stat = entry.stat()
                    except FileNotFoundError:  # removed meanwhile
                        continue
                    cached = cache.get((bucket_name, name))
                    # The very file the header was read from, unchanged (header_cache).
                    if (cached is not None and cached.inode == stat.st_ino
                            and cached.size == stat.st_size
                            and cached.mtime_ns == stat.st_mtime_ns):
                        found.append((cached.header, entry.path))
                        fresh.append(cached)
                        continue
                    read += 1
                    line = (first or first_line)(entry.path)
                    if line is None:
                        continue
                    try:
                        header = durable_header(line, path=entry.path)
                        check_placed(root, entry.path, header)
                    except LogFormatError as exc:
                        _skipped(entry.path, exc)
                        continue
                    found.append((header, entry.path))
                    fresh.append(header_cache.Cached(bucket.name, entry.name, stat.st_ino,
                                                     stat.st_size, stat.st_mtime_ns, header))
            if temps:
                sweep_temps(bucket.path)
    if read or len(fresh) != len(cache):
        header_cache.save(root, fresh)
    return found


def _skipped(path: str, exc: LogFormatError) -> None:
    """Warn that a listing leaves ``path`` out (imported here: listing is not hot)."""
    import sys
    import warnings

    reason = str(exc)
    if not isinstance(exc, MisplacedLogError):
        reason += "; `dsh-session validate FILE` says more, or remove the file from the store"
    # Attribute the warning to the first caller outside this package (the store call in
    # the user's code), however many layers the listing went through.
    package = __name__.split(".", 1)[0]
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        package
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(SkippedLogWarning(path, reason), stacklevel=level)


def find_log(root: str, session_id: str, suffix: str = ".jsonl") -> str | None:
    """The log file of a session in a store (any bucket, in directory order, as
    ``load_stored`` finds it); ``None`` when there is none."""
    try:
        name = encode_segment(session_id) + suffix
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
    last line is left for the follower. A log's history ends at its durable-end mark,
    when it has one (:mod:`.endmark`, read first).

    :raises OSError: the file cannot be read.
    :raises LogFormatError: its mark holds no byte count.
    """
    end = durable_end(path)
    with open(path, "rb") as f:
        offset = complete_end(f, within(os.fstat(f.fileno()).st_size, end))
        lines = last_lines(f, offset, count)
    return LogTail(lines, FilePosition(path, offset))


class Framing(Protocol):
    """How a follower finds complete lines in a log file's bytes: :data:`LINES` for a
    plain log, whole zstd frames for a compact one (:mod:`.jsonl_zstd`)."""

    def end_before(self, f: BinaryIO, limit: int) -> int:
        """Where the last complete unit (a line, a frame of lines) in the first ``limit``
        bytes of the file ends; 0 when none does."""
        ...

    def moved(self, fd: int, offset: int) -> bool:
        """Whether ``offset`` (a unit's end the follower read up to, not 0) is no longer
        one: the file was cut and regrew between two polls."""
        ...

    def complete(self, chunk: bytes) -> tuple[int, bytes]:
        """Of the bytes after a unit's end: how many make complete units, and their lines
        (each ``\n``-ended)."""
        ...


class _Lines:
    """A plain log's units are its lines."""

    def end_before(self, f: BinaryIO, limit: int) -> int:
        return complete_end(f, limit)

    def moved(self, fd: int, offset: int) -> bool:
        return os.pread(fd, 1, offset - 1) != b"\n"

    def complete(self, chunk: bytes) -> tuple[int, bytes]:
        end = chunk.rfind(b"\n") + 1  # complete lines only: a torn line waits
        return end, chunk[:end]


#: The framing of a plain log (:func:`follow_file`'s default).
LINES: Final[Framing] = _Lines()


def follow_file(
    position: object, *, timeout: float | None = None, poll: float = POLL_SECONDS,
    framing: Framing = LINES,
) -> Iterator[LogNews]:
    """Follow a log file from ``position``: yield its new *complete* lines as they arrive
    (a torn last line is reported once its newline arrives; in a compact log, a frame
    once it is whole: ``framing``).

    Polls, since a follower legitimately waits for data: every ``poll`` seconds it
    compares the file's size with what it has read, a ``stat`` costing microseconds.
    The file's size is read after its durable-end mark (:mod:`.endmark`), and what lies
    after the mark is not the log's: a failed batch that could not be rolled back is
    never reported once it is marked (and, reported before, is news of a cut).

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
            end = durable_end(path)  # the mark first, then the size
            size = within(os.fstat(fd).st_size, end)
            if size < offset:
                offset = framing.end_before(f, size)
                header_pending = offset == 0
                quiet_since = time.monotonic()
                yield LogNews([], FilePosition(path, offset),
                              f"the log was cut back to {size} bytes (a repair?); following "
                              f"from there")
                continue
            note = None
            if size > offset and offset and framing.moved(fd, offset):
                # Cut and regrown between two polls: what we read up to is no longer a
                # line end. Go back to the start of the line that is there now.
                offset = framing.end_before(f, offset - 1)
                header_pending = offset == 0
                note = ("the log was rewritten under the follower; following from the "
                        "last complete line")
            f.seek(offset)
            chunk = f.read(size - offset) if size > offset else b""
            end, text = framing.complete(chunk)
            if end or note is not None:
                lines = text[:-1].split(b"\n") if text else []
                offset += end
                if header_pending and lines:
                    lines, header_pending = lines[1:], False
                quiet_since = time.monotonic()
                yield LogNews(lines, FilePosition(path, offset), note)
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            time.sleep(poll)
