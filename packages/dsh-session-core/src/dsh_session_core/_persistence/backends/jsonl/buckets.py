"""What a JSONL store's folder holds, and how the backend finds it.

Which kind of store it is (plain or compact), the logs in its buckets (listing them,
finding one, checking one is where its header says), and the temp files killed first
writes left.

The system calls are :mod:`.files`'; where a log lives is :mod:`.paths`'. Where a
compact log's bytes differ (its name, its first line), the functions take the
difference as an argument; the plain log's is the default.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Callable
from typing import Final

from msgspec import UnsetType

from ...._logformat.logfile import durable_header
from ...._schema.header import SessionHeader
from ....errors import (
    LogFormatError,
    MisplacedLogError,
    SkippedLogWarning,
    StoreFolderError,
    StoreKindError,
)
from ... import file_locks
from ...urls import data_folder_store
from . import files
from .paths import COMPACT_SUFFIX, encode_segment, log_path

__all__ = [
    "COMPACT_MARK",
    "check_kind",
    "check_placed",
    "find_log",
    "foreign_entries",
    "list_logs",
    "make_store_folder",
    "mark_compact",
    "sweep_temps",
    "temps_of",
]

#: The temp file of a first write: ``<encoded id>.jsonl.<12 hex>.tmp`` (JsonlBackend, and
#: the compact backend too).
_TEMP = re.compile(r"(.+)\.jsonl\.[0-9a-f]{12}\.tmp")

#: The folder that marks a store's root as a compact store's (``jsonl+zstd:``). A folder,
#: not a file, for the reason the header cache's is one (:mod:`.header_cache`): the
#: reference takes every entry at a store's root for a bucket; this one it finds empty.
COMPACT_MARK: Final = ".jsonl-zstd"


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


#: The names of a store's buckets (:func:`~.paths.bucket_name`).
_BUCKET_NAME: Final = re.compile(r"_no-cwd|cwd-[0-9a-f]{12}")


def foreign_entries(root: str) -> list[str]:
    """The entries of the folder ``root`` that show it is not a JSONL store's folder,
    sorted: ``[]`` when it is one. A store's folder holds a bucket (``_no-cwd``, or
    ``cwd-`` and 12 hex digits: a session was written to it) or the compact mark (a
    compact store made before its first session); a folder that is missing, or holds
    nothing (a header cache aside, which listings of older versions left, or a
    projection sidecar), is an empty store, which its first session's write makes. Any
    other folder holds something else (a project, the user's own logs): a reader is told
    it is no store, rather than take its folders for buckets, its files for corrupt
    logs, and leave a header cache in it.
    Only names are read: nothing is written.

    :raises OSError: the folder cannot be listed (but is there).
    """
    from .header_cache import CACHE_DIR
    from .sidecar_file import SIDECAR_DIR

    try:
        entries = os.scandir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    with entries:
        names = []
        for entry in entries:
            if entry.name == COMPACT_MARK or _BUCKET_NAME.fullmatch(entry.name):
                return []
            if entry.name not in (CACHE_DIR, SIDECAR_DIR):
                names.append(entry.name)
    return sorted(names)


def mark_compact(root: str) -> None:
    """Mark a store's root (made if missing, in a folder that exists) as a compact
    store's, durably, before its first bucket is made (:func:`check_kind`)."""
    make_store_folder(root)
    mark = os.path.join(root, COMPACT_MARK)
    if os.path.isdir(mark):
        return
    with contextlib.suppress(FileExistsError):  # made meanwhile by another writer
        os.mkdir(mark, 0o700)
    files.fsync_dir(root)


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


def sweep_temps(bucket: str, held: str | None = None) -> dict[str, int]:
    """Remove the temp files killed first writes left in a bucket: the ones of session
    ``held`` (an encoded id whose writer lock the caller holds) at once; any other one
    only while holding its session's lock, taken here without waiting (a session being
    written by a live writer keeps its temp), and only when that lock file exists (every
    writer of ours creates it before its temp file). Best effort: any error leaves the
    file for the next sweep.

    :returns: the temp files of ``held`` removed, with their sizes (a delete names them).
    """
    held_temps: dict[str, int] = {}
    try:
        names = [entry.name for entry in os.scandir(bucket)]
    except OSError:
        return held_temps
    for name in names:
        match = _TEMP.fullmatch(name)
        if match is None:
            continue
        temp = os.path.join(bucket, name)
        if match[1] == held:
            with contextlib.suppress(OSError):
                held_temps[temp] = os.stat(temp, follow_symlinks=False).st_size
            files.unlink_quietly(temp)
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
        if not file_locks.same_file(fd, os.path.join(bucket, match[1] + ".lock")):
            os.close(fd)  # a delete removed the lock file meanwhile: not ours to judge
            continue
        try:
            files.unlink_quietly(temp)
        finally:
            os.close(fd)  # unlocks
    return held_temps


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


def list_logs(
    root: str, suffix: str = ".jsonl",
    first: Callable[[str], bytes | None] | None = None,
) -> list[tuple[SessionHeader, str]]:
    """Every ``*.jsonl`` log under a store's root (every ``*<suffix>`` one), with its
    header read from its first line only (by ``first``, default :func:`.files.first_line`: a
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
                logs = os.scandir(bucket.path)
            except FileNotFoundError:  # removed meanwhile
                continue
            temps = False
            bucket_name = bucket.name
            with logs:
                for entry in logs:
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
                    line = (first or files.first_line)(entry.path)
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


def make_store_folder(root: str) -> None:
    """Make a JSONL store's folder (mode 0700) if it is missing: in a folder that exists
    only, but for the embedded default, whose folders are made as needed (as the XDG
    base directory rules ask).

    :raises StoreFolderError: the folder above ``root`` is missing.
    """
    if os.path.isdir(root):
        return
    if root == os.path.abspath(data_folder_store()):
        files.mkdirs(root)
        return
    try:
        files.make_bucket(root)  # one level, as a bucket is made
    except (FileNotFoundError, NotADirectoryError):
        raise StoreFolderError(root, os.path.dirname(root)) from None
