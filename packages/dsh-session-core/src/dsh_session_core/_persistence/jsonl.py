"""The JSONL persistence backend: one append-only file per session, byte-compatible with
the reference's ``dsh-session-persistence-jsonl`` (spec plugins-persistence §9).

A log is a header line, then one event per line, each ``\\n``-ended, in the exact bytes
the reference writes (:mod:`.paths` says where it lives). Three rules make it
durable without ever rewriting a committed byte:

- **Materialize atomically.** A session's file appears with its header and first batch
  together: written to a temp file, fsynced, then published with a hard link, which
  (unlike a rename) fails when the log already exists.
- **Append or roll back.** A batch is written with one ``O_APPEND`` write and fsynced;
  when either fails, the file is cut back to its previous size before the error is
  raised, so a retry of the same seqs never duplicates them.
- **Never read a failed batch as history.** When the roll back fails too, the size the
  log had is marked beside it (:mod:`.endmark`: ``<log>.durable``) before the error is
  raised, and every reader stops there; the next write (or a load's repair) cuts the
  log back to it and removes the mark. When even marking fails, the flush's error says
  the session is not durable, and nothing more is written to it until the cut succeeds.
- **Read the longest valid prefix.** :func:`~dsh_session_core._logfile.scan_log` (the
  format's owner) keeps every complete line up to the first hole (an unparsable line or
  a seq gap), raises when that hole lies inside the committed region (at or before the
  last ``turn/end``), and otherwise reports the rest as a torn tail for the coordinator
  to cut.

This module is the backend class; the bytes are read by :mod:`dsh_session_core._logfile`
and the system calls are :mod:`.files`'.

Beyond the reference, :meth:`JsonlBackend.acquire` takes an exclusive ``flock`` on a
``.lock`` file beside the log, so two writers (two processes, or two backends in one
process) cannot interleave appends to one session. A session released with no log (made,
never flushed) takes its lock file away with it, while still holding it.

The compact backend (:mod:`.jsonl_zstd`) is this class with another file format: the
methods under "the file format" below are where the two differ (a log's name, how a
batch's bytes are written, how a file is read back into the log's bytes).
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import os
import secrets
import stat
import threading
from collections.abc import Collection, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar, Final, NamedTuple

from msgspec import UnsetType

from .._codec import ENCODER
from .._header import SessionHeader
from .._logfile import LogCounts, ScanResult, count_log, durable_header, scan_log
from .._registry import EventRegistry
from ..errors import LinkedLogError, LogFormatError, PersistenceError, StoreWriteError
from ..events import Event
from . import endmark, files
from .base import (
    Deleted,
    DeleteStatus,
    LogNews,
    LogTail,
    SessionLockedError,
    SessionSummary,
    StoredLog,
    WriterLock,
    continued,
    not_found,
)
from .paths import encode_segment, lock_path, log_path
from .urls import make_store_folder

if TYPE_CHECKING:
    from .._search import SearchHit, SearchQuery

__all__ = ["MAX_OPEN_LOGS", "JsonlBackend"]

#: How many append descriptors stay open between batches (least recently used go first).
MAX_OPEN_LOGS: Final = 128
#: How many logs' ends a backend remembers (least recently written go first: a
#: forgotten one's ``lines_since`` reads the file's end instead). An end holds a last
#: line of up to :data:`MAX_TAIL` bytes, so a process writing many sessions is bounded.
MAX_KNOWN_ENDS: Final = 1024

#: How many times :meth:`JsonlBackend.acquire` takes a lock file again that a delete
#: removed while it was being locked (once is all a delete makes it need).
_LOCK_ATTEMPTS: Final = 8


def _cwd_of(header: SessionHeader) -> str | None:
    # An empty cwd string is still a cwd (it has a bucket); only an absent one is not.
    return None if isinstance(header.cwd, UnsetType) else header.cwd


def _refusal(session_id: str) -> FileExistsError:
    return FileExistsError(
        f'refusing to materialize "{session_id}": a log already exists on disk '
        f"(load/resume it instead)"
    )


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _first_seq_after(published: bytes) -> int:
    """The seq after a published first write's lines (header + events, each ended)."""
    return published.count(b"\n") - 1


def _not_durable(session_id: str, path: str, size: int, exc: OSError) -> StoreWriteError:
    """The error of a write to a log that holds a failed batch after byte ``size`` which
    neither could be cut nor marked (:mod:`.endmark`): the session is not durable."""
    return StoreWriteError(session_id, path, exc, action="writing", left=(
        f"but the session is NOT DURABLE until a write succeeds: {path} may still hold a "
        f"failed batch's bytes after byte {size}, and nothing on disk says they were not "
        f"written, so a process that ends now leaves them to be read as history. Flush "
        f"again once the device works (it cuts them first; until then nothing more is "
        f"written to the session), or, with no writer left, cut them by hand: "
        f"truncate -s {size} {path}"
    ))


class _FileLock:
    """A held ``flock`` on a session's ``.lock`` file; released by :meth:`release`, by
    closing the backend, or by the death of the process. ``dev`` and ``ino`` are the lock
    file's (what :meth:`JsonlBackend.acquire` checks the file at the path against when
    it takes the lock again on this descriptor)."""

    __slots__ = ("_backend", "_fd", "dev", "ino", "log", "path")

    def __init__(self, fd: int, path: str, log: str, backend: JsonlBackend,
                 dev: int, ino: int) -> None:
        self._fd = fd
        self.path = path
        self.log = log
        self._backend = backend
        self.dev = dev
        self.ino = ino

    def release(self) -> None:
        """Unlock; a second call does nothing. When the session has no log (created and
        never flushed, or its first write failed), the lock file is removed first, while
        held, as :meth:`JsonlBackend.delete` removes it: a writer that opened it
        meanwhile locks a dead file, sees it (``acquire`` checks) and makes a new one, so
        two writers never both hold the session.

        Otherwise the descriptor stays open, unlocked, for the backend's next
        :meth:`~JsonlBackend.acquire` of the session (an unlocked descriptor keeps no
        one out: ``flock`` excludes only holders)."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        backend = self._backend
        backend._forget_lock(self)
        try:
            # The log is known to be there when this backend saw it at the acquire or
            # wrote it since (_known): no stat needed.
            if not backend._knows(self.log) and not files.exists(self.log):
                if files.same_file(fd, self.path):
                    files.unlink_quietly(self.path)  # best effort: a lock file left is harmless
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                return
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)  # closing the last descriptor would release it anyway
            raise
        backend._park(self.path, fd, self.dev, self.ino)

    def __repr__(self) -> str:
        state = "held" if self._fd >= 0 else "released"
        return f"<session writer lock {self.path} ({state})>"


class _Known(NamedTuple):
    """What this backend last wrote at the end of a log: the file (``dev``, ``ino``), its
    size then, the bytes it ends with (``tail``: as written) and its last line (plain,
    without its newline). A log still so is a log no one wrote to since
    (:meth:`JsonlBackend.lines_since`)."""

    dev: int
    ino: int
    size: int
    tail: bytes
    line: bytes


#: The longest end of a batch remembered to compare with the file (:class:`_Known`): a
#: longer last line (or compact frame) leaves the next ``lines_since`` to read the file.
MAX_TAIL: Final = 65536


def _last_line(plain: bytes) -> bytes:
    """The last line of ``plain`` (lines each ``\\n``-ended), without its newline."""
    return plain[plain.rfind(b"\n", 0, len(plain) - 1) + 1:-1]


class JsonlBackend:
    """Sessions as JSONL files under ``root`` (see the module docstring).

    Methods may be called from several threads, never twice at once for one session
    (the coordinator serializes per session).

    :param root: the directory holding every bucket; made absolute once, here, so a
        later ``chdir`` does not move the sessions.
    """

    name = "session-persistence-jsonl"
    #: How a log file's name ends, after the encoded session id (:mod:`.paths`).
    suffix: ClassVar[str] = ".jsonl"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """:raises StoreKindError: ``root`` is a compact store's folder."""
        self.root = os.path.abspath(os.fspath(root))
        self._check_kind()
        self._mutex = threading.Lock()
        # Append descriptors kept open between batches: reopening a log for every
        # batch costs more than the write. Checked out (popped) while in use, so that
        # evicting one never closes a descriptor another thread is writing to.
        self._fds: dict[str, int] = {}
        self._locks: set[_FileLock] = set()
        # Logs whose last rollback failed, with the size they had before the failed
        # batch: the next write to one settles it first (``_settle``), never blindly.
        self._dirty: dict[str, int] = {}
        # Those of them whose durable-end mark could not be written either (.endmark):
        # only this backend knows where their history ends; its own loads stop there.
        self._unmarked: dict[str, int] = {}
        # Logs published by a first write that failed afterwards and could not be
        # withdrawn, with the bytes published: a retry adopts them (``_republish``).
        self._unacked: dict[str, bytes] = {}
        # Buckets swept of the temp files of killed first writes (once per backend).
        self._swept: set[str] = set()
        # How each log this backend wrote ended then (_Known): lines_since compares the
        # file with it (one stat, one small pread) instead of reading the file's end. A
        # log in it is there (the lock's release needs no stat to tell).
        self._known: dict[str, _Known] = {}
        # Lock files released and kept open, unlocked (lock path: descriptor and the
        # file's dev and ino), least recently used first: taking the lock again is a
        # flock and a stat, not a mkdir, an open and a walk of the path.
        self._idle: dict[str, tuple[int, int, int]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    # -- the file format: what the compact backend (.jsonl_zstd) replaces --

    def _check_kind(self) -> None:
        """Refuse a root of the other kind (:func:`~.files.check_kind`)."""
        files.check_kind(self.root, compact=False)

    def _prepare_root(self) -> None:
        """Called before a bucket is made in the root (a plain root needs nothing)."""

    def _encode(self, plain: bytes) -> bytes:
        """A batch's bytes (header and event lines) as written to the file."""
        return plain

    def _end_of(self, plain: bytes, written: bytes) -> bytes | None:
        """The bytes a log ends with after a batch (``plain``, written as ``written``),
        enough to tell that no one wrote after it (:class:`_Known`): a plain log's last
        line with the newlines around it. ``None``: too long to compare."""
        end = plain.rfind(b"\n", 0, len(plain) - 1)
        if len(plain) - end > MAX_TAIL:
            return None
        # The newline before the line is the end of the line before (or the header's),
        # written earlier: compared too, it tells a line that ends the same way.
        return plain[end:] if end >= 0 else b"\n" + plain

    def _scan(self, data: bytes, registry: EventRegistry, path: str
              ) -> tuple[ScanResult, object | None]:
        """A log file's durable reading (:func:`scan_log`), and where its torn tail
        starts (a byte offset of the file; ``None``: none)."""
        scan = scan_log(data, registry, path=path)
        return scan, scan.committed_bytes if scan.committed_bytes < len(data) else None

    def _read_plain(self, path: str) -> bytes | None:
        """The log's bytes, as the reference would write them (``None``: no file)."""
        return files.read_if_exists(path)

    def _seq_before(self, path: str, end: int) -> int | None:
        """:func:`~.files.seq_before`: the seq of the last line in the file's first
        ``end`` bytes."""
        return files.seq_before(path, end)

    def _first_line(self, path: str) -> bytes | None:
        """The log's first line (:func:`~.files.first_line`)."""
        return files.first_line(path)

    def _count(self, path: str) -> LogCounts:
        """The log's counts (:func:`count_log`), up to its durable-end mark."""
        end = endmark.durable_end(path)
        if end is None:
            return count_log(path)
        import io

        from .._logfile import count_file

        with open(path, "rb") as f:
            return count_file(io.BytesIO(f.read(end)))

    def _tail(self, path: str, count: int) -> LogTail:
        """The log's last ``count`` lines (:func:`~.files.tail_file`)."""
        return files.tail_file(path, count)

    def _lines_after(self, path: str, after: int, limit: int | None
                     ) -> builtins.list[bytes] | None:
        """The log's lines after seq ``after`` (:func:`~.ranges.lines_after`)."""
        from .ranges import lines_after

        return lines_after(path, after, limit)

    def _lines_of_types(self, path: str, types: Collection[str]
                        ) -> builtins.list[bytes] | None:
        """The log's lines of those types (:func:`~.ranges.lines_of_types`)."""
        from .ranges import lines_of_types

        return lines_of_types(path, types)

    # -- reading --

    def _end(self, path: str) -> int | None:
        """Where the log's history ends, when a failed write said so: its durable-end
        mark (:mod:`.endmark`), or the one this backend could not write."""
        with self._mutex:
            end = self._unmarked.get(path)
        return end if end is not None else endmark.durable_end(path)

    def _read(self, path: str) -> tuple[bytes, int | None] | None:
        """The log's bytes up to where its history ends, and that end when a failed
        write marked one (read first); ``None``: no file."""
        end = self._end(path)
        data = files.read_if_exists(path)
        if data is None:
            return None
        return (data, None) if end is None else (data[:end], end)

    def _stored(self, read: tuple[bytes, int | None], registry: EventRegistry, path: str
                ) -> StoredLog:
        data, end = read
        scan, torn = self._scan(data, registry, path)
        files.check_placed(self.root, path, scan.header)
        if end is not None and torn is None:
            # A failed batch may lie after the mark: a writer's load cuts the log there
            # and removes the mark (commit_repair), even when nothing follows it.
            torn = len(data)
        with self._mutex:
            # What was just read is the log now: the coordinator re-anchors on it, so a
            # failed batch's leftover is no longer this backend's to cut, unless it was
            # left out of the reading (then the next write still cuts it first).
            if end is None:
                self._dirty.pop(path, None)
        return StoredLog(scan.header, scan.events, torn, scan.jsonl)

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session from the first bucket (in directory order) holding its log.

        :raises LogFormatError: committed corruption.
        :raises OSError: the root or a log cannot be read (other than "not found").
        """
        name = encode_segment(session_id) + self.suffix
        try:
            buckets = os.scandir(self.root)
        except FileNotFoundError:
            return None
        with buckets:
            for bucket in buckets:
                if not bucket.is_dir():
                    continue
                path = os.path.join(bucket.path, name)
                read = self._read(path)
                if read is not None:
                    return self._stored(read, registry, path)
        return None

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        """The session stored in exactly ``cwd``'s bucket (``None``: the no-cwd bucket).

        :raises NotADirectoryError: the bucket path is a file (not "absent").
        """
        path = log_path(self.root, cwd, session_id, self.suffix)
        read = self._read(path)
        return None if read is None else self._stored(read, registry, path)

    def location(self, header: SessionHeader) -> str:
        """The session's log file (where its cwd bucket puts it)."""
        return log_path(self.root, _cwd_of(header), header.id, self.suffix)

    def check_id(self, session_id: str) -> None:
        """The common rule only (:func:`~.base.check_common_id`): any other id has a
        file, a long one under a shortened name (:func:`~.paths.encode_segment`)."""
        from .base import check_common_id

        check_common_id(session_id, self.name)

    def list(self) -> list[SessionHeader]:
        """The header of every ``*.jsonl`` log under the root, read from its first line
        only; files without a complete, valid header line are skipped. No order.

        :raises OSError: the root cannot be listed (a missing root lists nothing).
        """
        return [header for header, _ in
                files.list_logs(self.root, self.suffix, self._first_line)]

    def summaries(self) -> builtins.list[SessionSummary]:
        """Every log under the root with its counts (:func:`count_log`): each file found
        as :meth:`list` finds it, then read once, sequentially, in 1 MiB chunks, without
        parsing JSON; its last complete line, read from the end, gives the last activity.
        A torn last line is not counted, and flagged. O(store size) bytes read.

        :raises OSError: the root cannot be listed.
        """
        found = []
        for header, path in files.list_logs(self.root, self.suffix, self._first_line):
            try:
                counts = self._count(path)
            except OSError:  # removed since it was listed
                continue
            found.append(SessionSummary(header, counts.events, counts.turns,
                                        counts.last_activity, counts.torn))
        return found

    def summaries_of(self, headers: Sequence[SessionHeader]) -> builtins.list[SessionSummary]:
        """:meth:`summaries` of just these sessions: their logs alone are read (each
        at the path its header gives it)."""
        found = []
        for header in headers:
            try:
                counts = self._count(self.location(header))
            except OSError:  # removed since it was listed
                continue
            found.append(SessionSummary(header, counts.events, counts.turns,
                                        counts.last_activity, counts.torn))
        return found

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last ``count`` complete lines of the session's log (in the first bucket
        holding it), read backwards from the end of the file; the position is a
        :class:`~.files.FilePosition`.

        :raises OSError: the log cannot be read.
        """
        path = files.find_log(self.root, session_id, self.suffix)
        if path is None:
            return None
        try:
            return self._tail(path, count)
        except FileNotFoundError:  # removed since it was found
            return None

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The lines after seq ``after`` (at most ``limit``), found by a binary search
        over the log file (:func:`~.ranges.lines_after`): O(log size) small reads plus
        the lines returned. A log that search cannot read (written by hand in another
        key order) is read whole instead.

        :raises OSError: the log cannot be read.
        """
        from .base import Backend

        path = files.find_log(self.root, session_id, self.suffix)
        if path is None:
            return None
        try:
            found = self._lines_after(path, after, limit)
        except FileNotFoundError:  # removed since it was found
            return None
        if found is None:
            return Backend.read_lines(self, session_id, after, limit)
        return found

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        """:meth:`~.base.Backend.lines_since`. When this backend wrote the log's end and
        the file is still that (the same file and size, one ``stat``, ending with the
        same bytes, one small ``pread``: :class:`_Known`), no one else wrote: nothing
        to return. Otherwise the file is read (:meth:`_lines_since_read`). A log with a
        durable-end mark or a failed write of this backend's own still to settle is left
        to a whole load (it repairs them).

        :raises OSError: the log cannot be read.
        """
        path = self.location(header)
        with self._mutex:
            if path in self._dirty or path in self._unmarked:
                return None
            known = self._known.get(path)
        if endmark.durable_end(path) is not None:
            return None
        if known is not None and self._unchanged(path, known):
            return [] if continued([known.line], last) is not None else None
        return self._lines_since_read(header, path, last)

    def _unchanged(self, path: str, known: _Known) -> bool:
        """Whether the log at ``path`` is still the file, the size and the end this
        backend left it with (read through its append descriptor, opened to read too)."""
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
            self._checkin(path, fd)

    def _lines_since_read(self, header: SessionHeader, path: str, last: Event
                          ) -> builtins.list[bytes] | None:
        """:meth:`lines_since` from the file: its last line read from its end (no one
        else wrote: nothing to return), else the lines from ``last`` on found by a binary
        search; ``None`` for a torn tail (the load cuts it)."""
        from .._logfile import complete_end, last_lines
        from .ranges import lines_after

        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if complete_end(f, size) != size:
                    return None  # a torn tail: the load cuts it
                tail = last_lines(f, size, 1)
        except FileNotFoundError:
            return None
        if continued(tail, last) is not None:
            return []  # the log still ends with ``last``
        found = lines_after(path, last.seq - 1, None)
        return None if found is None else continued(found, last)

    def lines_of_types(self, session_id: str, types: Collection[str]
                       ) -> builtins.list[bytes] | None:
        """:func:`~.base.lines_of_types_of`: the lines of those types, found in one
        read of the log file (:func:`~.ranges.lines_of_types`). A log that search
        cannot read (written by hand in another key order) has every line read and
        filtered instead.

        :raises OSError: the log cannot be read.
        """
        from .base import keep_types

        path = files.find_log(self.root, session_id, self.suffix)
        if path is None:
            return None
        try:
            found = self._lines_of_types(path, types)
        except FileNotFoundError:  # removed since it was found
            return None
        if found is None:
            every = self.read_lines(session_id, -1, None)
            return None if every is None else keep_types(every, types)
        return found

    def follow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> Iterator[LogNews]:
        """Follow the log file itself (:func:`~.files.follow_file`: polling its size)."""
        return files.follow_file(position, timeout=timeout)

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """Every hit of ``query``: a streaming scan of the logs (no index to go stale),
        in worker processes for a large store (:func:`~.search.scan_files`)."""
        from .search import scan_files

        return scan_files(self.root, self._search_paths(query), query)

    def _search_paths(self, query: SearchQuery) -> builtins.list[str]:
        """The log files a search reads: the query's sessions', else every one."""
        from .search import log_files

        if query.sessions:
            return [path for sid in sorted(query.sessions)
                    if (path := files.find_log(self.root, sid, self.suffix)) is not None]
        return log_files(self.root, self.suffix)

    def exists(self) -> bool:
        """Whether the root folder exists (it is made at the first write)."""
        return os.path.isdir(self.root)

    def store_identity(self) -> Hashable | None:
        """The root folder, resolved."""
        return ("jsonl", os.path.realpath(self.root))

    # -- writing --

    def append_batch(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        jsonl: bytes,
        materialized: bool,
    ) -> None:
        """Durably append ``jsonl`` (the lines of ``events``) to the session's log; when
        not ``materialized``, create the log with its header and this batch at once.

        :raises FileExistsError: not materialized, but a log already exists.
        :raises OSError: the write failed; the file is as it was before.
        """
        if not events:
            return  # a session file exists iff it holds an event
        if not jsonl.endswith(b"\n"):
            msg = "a batch's log lines must each end with a newline"
            raise ValueError(msg)
        path = self.location(header)
        if materialized:
            self._append(header.id, path, jsonl, events[0].seq)
        else:
            self._materialize(header, path, jsonl)

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """Cut the log back to ``torn`` bytes (when not ``None``; ``0`` would be a cut
        too), fsync, then append the ``closers`` like any batch."""
        path = self.location(header)
        if torn is not None:
            if type(torn) is not int or torn < 0:
                msg = f"a JSONL torn marker is a byte offset, got {torn!r}"
                raise TypeError(msg)
            self._truncate(header.id, path, torn)
        if closers:
            self._append(header.id, path, jsonl, closers[0].seq)

    def _checkout(self, session_id: str, path: str) -> int:
        with self._mutex:
            fd = self._fds.pop(path, None)
        if fd is None:
            # No O_CREAT: a materialized log that vanished is an error, not a new
            # header-less file. Never through a link (files.open_nofollow).
            # Read-write: lines_since reads the log's end through it (_unchanged).
            fd = files.open_nofollow(self.root, session_id, path,
                                     os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        return fd

    def _checkin(self, path: str, fd: int) -> None:
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

    def _append(self, session_id: str, path: str, plain: bytes, first_seq: int) -> None:
        data = self._encode(plain)
        with self._mutex:
            # Until this write is durable, the log's end is not what was known.
            self._known.pop(path, None)
        try:
            fd = self._checkout(session_id, path)
            try:
                if path in self._dirty:
                    self._settle(session_id, path, fd, first_seq)
                before = os.fstat(fd)
                size = before.st_size
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:
            with self._mutex:
                unmarked = self._unmarked.get(path)
            if unmarked is None or isinstance(exc, StoreWriteError):
                raise
            # Whatever failed now, an earlier failed batch still stands unmarked.
            raise _not_durable(session_id, path, unmarked, exc) from exc
        try:
            files.write_all(fd, data)
            os.fsync(fd)
        except BaseException as exc:
            # Nothing of a failed batch may stay: the coordinator's cursor did not move,
            # and a retry writes the same seqs again.
            undo = files.cut(fd, size)
            if undo is None:
                self._checkin(path, fd)
                raise
            os.close(fd)
            # The failed batch may still be there: the next write cuts it first, and
            # meanwhile no reader (in any process) may take it for history.
            with self._mutex:
                self._dirty[path] = size
            self._mark(session_id, path, size, exc, f"rolling {path} back to {size} "
                                                    f"bytes failed too: {undo}")
            raise
        self._remember(path, before, size + len(data), plain, data)
        self._checkin(path, fd)

    def _remember(self, path: str, st: os.stat_result, size: int, plain: bytes,
                  written: bytes) -> None:
        """Note how a durable write left the log (:class:`_Known`): the file of ``st``,
        ``size`` bytes long, ending with ``written`` (``plain``'s bytes)."""
        tail = self._end_of(plain, written)
        if tail is not None:
            known = _Known(st.st_dev, st.st_ino, size, tail, _last_line(plain))
            with self._mutex:
                self._known.pop(path, None)  # the most recent last
                self._known[path] = known
                while len(self._known) > MAX_KNOWN_ENDS:  # forgotten: read from the file
                    del self._known[next(iter(self._known))]

    def _mark(self, session_id: str, path: str, size: int, exc: BaseException,
              why: str) -> None:
        """Mark ``size`` as where the log's history ends (:mod:`.endmark`), after a
        failed write whose bytes could not be cut (``why``), and say so on ``exc``.

        :raises StoreWriteError: marking failed too: the session is not durable (a
            process ending now leaves the failed bytes to be read as history); the
            error says so and what to do.
        """
        mark = endmark.mark_of(path)
        try:
            endmark.write_mark(path, size)
        except OSError as failed:
            with self._mutex:
                self._unmarked[path] = size
            note = (f"{why}; marking byte {size} as its durable end in {mark} failed too: "
                    f"{failed}")
            exc.add_note(note)
            if isinstance(exc, OSError):
                raise _not_durable(session_id, path, size, exc) from exc
            return
        with self._mutex:
            self._unmarked.pop(path, None)
        exc.add_note(f"{why}; byte {size} is marked as its durable end in {mark}: every "
                     f"reader stops there, and the next write cuts the rest first")

    def _settle(self, session_id: str, path: str, fd: int, first_seq: int) -> None:
        """Before writing to a log whose rollback failed: re-read its size and the last
        line before the size it had (``durable``), then cut the failed batch's leftover
        back to it. Refuse when the log is no longer what this writer left (shorter, or
        not ending ``durable`` with the line before ``first_seq``): appending then could
        repeat or skip seqs, and a log with a seq gap before its last ``turn/end`` never
        loads again.

        :raises PersistenceError: the log changed; nothing was written.
        :raises OSError: the cut failed again (the log stays to be settled).
        """
        durable = self._dirty[path]
        size = os.fstat(fd).st_size
        last = self._seq_before(path, durable) if size >= durable else None
        if last is None or last != first_seq - 1:
            msg = (
                f'the log {path} of session "{session_id}" is not as its writer left it '
                f"after a failed write (it holds {size} bytes; its last durable line, seq "
                f"{first_seq - 1}, ended at byte {durable}): nothing more is appended to "
                f"it. Close the store and open the session again (its log loads as it is)"
            )
            raise PersistenceError(msg, session_id=session_id)
        if size > durable:
            undo = files.cut(fd, durable)
            if undo is not None:
                why = (f"{path} still holds {size - durable} byte(s) of a failed batch "
                       f"after its last durable line (byte {durable}); nothing is appended "
                       f"to it until they are cut")
                with self._mutex:
                    unmarked = path in self._unmarked
                if unmarked:  # try again to say where the history ends
                    self._mark(session_id, path, durable, undo, why)
                else:
                    undo.add_note(why)
                raise undo
        # Cut: the mark has nothing left to hide, and must not hide the batch to come.
        endmark.remove_mark(path)
        with self._mutex:
            self._dirty.pop(path, None)
            self._unmarked.pop(path, None)

    def _truncate(self, session_id: str, path: str, size: int) -> None:
        with self._mutex:
            self._known.pop(path, None)
        fd = self._checkout(session_id, path)
        try:
            current = os.fstat(fd).st_size
            if size > current:
                msg = f"cannot cut {path} to {size} bytes: it holds only {current}"
                raise ValueError(msg)
            os.ftruncate(fd, size)
            os.fsync(fd)
            # A repair's cut is to a size just read, at or before a durable-end mark the
            # read stopped at: the mark has nothing left to hide (.endmark).
            endmark.remove_mark(path)
        except BaseException:
            os.close(fd)
            raise
        with self._mutex:
            self._dirty.pop(path, None)
            self._unmarked.pop(path, None)
        self._checkin(path, fd)

    def _materialize(self, header: SessionHeader, path: str, jsonl: bytes) -> None:
        bucket = os.path.dirname(path)
        # Each new directory entry is made durable in its parent, down to the bucket.
        make_store_folder(self.root)  # in a folder that exists, never above it
        files.fsync_dir(os.path.dirname(self.root))
        self._prepare_root()
        files.make_bucket(bucket)
        files.fsync_dir(self.root)
        files.check_bucket(self.root, header.id, bucket)
        if os.path.islink(path):
            raise LinkedLogError(header.id, path, files.link_target(path))
        content = ENCODER.encode(header) + b"\n" + jsonl
        if files.exists(path):
            if self._republish(header, path, content):
                return
            raise _refusal(header.id)
        # A mark left by a log deleted meanwhile (a delete killed between the two
        # unlinks) belongs to no log: it must not cut this one (.endmark).
        endmark.remove_mark(path)
        # <id>.jsonl.<hex>.tmp for either kind of log (files.sweep_temps finds them).
        temp = f"{path.removesuffix(self.suffix)}.jsonl.{secrets.token_hex(6)}.tmp"
        # O_APPEND: once published, this descriptor is the log's append descriptor.
        # Read-write, as every append descriptor (_checkout).
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                     0o600)
        written = self._encode(content)
        try:
            files.write_all(fd, written)
            os.fsync(fd)
            try:
                # A hard link, never a rename: it fails when the log exists, so a log
                # is never replaced.
                os.link(temp, path)
            except FileExistsError as exc:
                raise _refusal(header.id) from exc
            try:
                files.fsync_dir(bucket)
            except BaseException as exc:
                # Not durable, so not acknowledged: unpublish, so that a retry can
                # materialize again instead of being refused.
                try:
                    os.unlink(path)
                except OSError as undo:
                    # Published, unacknowledged: the retry finishes this publication.
                    with self._mutex:
                        self._unacked[path] = content
                    exc.add_note(f"withdrawing {path} failed too: {undo}; the next "
                                 f"write finishes its publication")
                raise
        except BaseException:
            os.close(fd)
            files.unlink_quietly(temp)
            raise
        files.unlink_quietly(temp)
        try:
            st = os.fstat(fd)
        except OSError:
            pass  # durable all the same: only the next lines_since reads the file
        else:
            self._remember(path, st, st.st_size, content, written)
        self._checkin(path, fd)

    def _republish(self, header: SessionHeader, path: str, content: bytes) -> bool:
        """Finish a first write that published the log but failed to make it durable or
        to withdraw it (``_unacked``): when the log still holds exactly what was
        published, and the retry's bytes start with it, make it durable and append the
        rest. ``False`` when the log is not that publication (the caller refuses)."""
        published = self._unacked.get(path)
        if published is None or not content.startswith(published):
            return False
        if self._read_plain(path) != published:
            return False
        fd = files.open_nofollow(self.root, header.id, path,
                                 os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:
            os.fsync(fd)
            files.fsync_dir(os.path.dirname(path))
        except BaseException:
            os.close(fd)
            raise
        with self._mutex:
            self._unacked.pop(path, None)
        self._checkin(path, fd)
        rest = content[len(published):]
        if rest:
            # The retry's batch continues the published one (the same seqs first).
            seq = _first_seq_after(published)
            self._append(header.id, path, rest, seq)
        return True

    # -- the writer lock --

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's writer lock (``flock`` on ``<bucket>/<id>.lock``), without
        waiting. Every lock file is opened by its own descriptor, so two backends in one
        process exclude each other too (flock locks belong to open file descriptions).

        The lock file is created on demand, and deleted only by :meth:`delete`, while it
        holds the lock. A writer that opened it before that and locks it after locks an
        unlinked file: the lock is then checked to be on the file at the path
        (:func:`~.files.same_file`), and taken again on the new one when it is not, so
        two writers never both hold a session.

        A released lock's descriptor is kept open, unlocked (:meth:`_FileLock.release`):
        taking the lock again locks it and checks, by one ``stat`` each, that the lock
        file at the path is still the one it opened, that the bucket is no link and the
        log none either; when one is not so, the lock is taken as the first time.

        :raises SessionLockedError: another writer holds it.
        """
        path = lock_path(self.root, _cwd_of(header), header.id)
        log = self.location(header)
        with self._mutex:
            idle = self._idle.pop(path, None)
        if idle is not None:
            lock = self._relock(header, path, log, *idle)
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
            fd = files.open_nofollow(self.root, header.id, path,
                                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                if os.path.islink(log):
                    raise LinkedLogError(header.id, log, files.link_target(log))
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise SessionLockedError(header.id, f"lock {path}") from None
            except BaseException:
                os.close(fd)
                raise
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
            raise SessionLockedError(header.id, f"lock {path} (removed under us, again and "
                                                f"again: a delete loop?)")
        try:
            self._check_known(log, _lstat(log))
        except BaseException:
            os.close(fd)
            raise
        lock = _FileLock(fd, path, log, self, here.st_dev, here.st_ino)
        with self._mutex:
            self._locks.add(lock)
            sweep = bucket not in self._swept
            self._swept.add(bucket)
        # Holding this session's lock, its own leftover temp files are dead; the other
        # sessions' ones are removed only under their locks (files.sweep_temps).
        if sweep:
            files.sweep_temps(bucket, encode_segment(header.id))
        return lock

    def _relock(self, header: SessionHeader, path: str, log: str, fd: int, dev: int,
                ino: int) -> _FileLock | None:
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
            self._park(path, fd, dev, ino)
            raise SessionLockedError(header.id, f"lock {path}") from None
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
                    raise LinkedLogError(header.id, log, files.link_target(log))
                self._check_known(log, found)
        except FileNotFoundError:
            usable = False
        except BaseException:
            os.close(fd)  # unlocks
            raise
        if not usable:
            os.close(fd)  # unlocks
            return None
        lock = _FileLock(fd, path, log, self, dev, ino)
        with self._mutex:
            self._locks.add(lock)
        return lock

    def _check_known(self, log: str, found: os.stat_result | None) -> None:
        """Just after taking the session's lock: forget the append descriptor and the
        known end (:class:`_Known`) of a log that is no longer the file they are of
        (``found``: the log's ``lstat``, ``None`` when it is gone). Another process may
        have deleted the session and made it anew since this backend wrote it; a write
        through the old descriptor would land in the removed file."""
        with self._mutex:
            known = self._known.get(log)
            fd = self._fds.get(log)
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
        with self._mutex:
            self._known.pop(log, None)
            stale = self._fds.pop(log, None)
        if stale is not None:
            with contextlib.suppress(OSError):
                os.close(stale)

    # -- deleting --

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove the session's log (from the first bucket holding it, as
        :meth:`load_stored` finds it), its lock file and the temp files of its killed
        first writes, under its writer lock (:meth:`acquire`), then make the removal
        durable (the bucket is fsynced). The bucket folder stays (a writer may be making
        a file in it). Only files named for exactly this id are touched: the encoding
        of ids into names is injective (:mod:`.paths`).

        :raises SessionLockedError: a writer holds the session.
        :raises PersistenceError: no log of this id (``not found``).
        :raises MisplacedLogError: the file named for this id holds another session
            (renamed by hand): it is left alone.
        :raises LogFormatError: its first line is not a session header.
        :raises LinkedLogError: the log, its lock or its bucket is a symbolic link.
        """
        path = files.find_log(self.root, session_id, self.suffix)
        if path is None:
            raise not_found(session_id)
        header = self._header_at(path)
        lock_file = lock_path(self.root, _cwd_of(header), header.id)
        # Measured first: taking the lock may sweep them already (acquire).
        temps = self._temps(path, header.id)
        if dry_run:
            if os.path.islink(path):
                raise LinkedLogError(header.id, path, files.link_target(path))
            if not files.lock_is_free(lock_file):
                raise SessionLockedError(header.id, f"lock {lock_file}")
            return self._report(header, path, lock_file, temps, "would-delete")
        lock = self.acquire(header)
        try:
            if not files.exists(path):  # deleted meanwhile, by another store
                raise not_found(session_id)
            report = self._report(header, path, lock_file, temps, "deleted")
            self._forget(path)
            os.unlink(path)
            for temp in temps:
                files.unlink_quietly(temp)
            # Unlinked while held: a writer that opened it before locks a dead file,
            # sees it (acquire checks) and takes the lock on a new one.
            files.unlink_quietly(lock_file)
            files.fsync_dir(os.path.dirname(path))
        finally:
            lock.release()
        return report

    def _header_at(self, path: str) -> SessionHeader:
        line = self._first_line(path)
        if line is None:
            msg = f"{path} has no complete first line: it is no session log (left as it is)"
            raise LogFormatError(msg, path=path, line=1)
        header = durable_header(line, path=path)
        files.check_placed(self.root, path, header)
        return header

    @staticmethod
    def _temps(path: str, session_id: str) -> dict[str, int]:
        """The session's dead temp files beside its log, and its durable-end mark
        (:mod:`.endmark`), with their sizes."""
        found = {}
        for temp in [*files.temps_of(os.path.dirname(path), encode_segment(session_id)),
                     *endmark.mark_files(path)]:
            with contextlib.suppress(OSError):
                found[temp] = os.stat(temp, follow_symlinks=False).st_size
        return found

    def _report(
        self, header: SessionHeader, path: str, lock_file: str, temps: dict[str, int],
        status: DeleteStatus,
    ) -> Deleted:
        size = os.stat(path, follow_symlinks=False).st_size + sum(temps.values())
        counts = self._count(path)
        last = counts.last_activity
        if isinstance(last, bool) or not isinstance(last, int | float):
            last = None  # a time only (a hand-written log may hold anything there)
        return Deleted(header.id, status, path, (path, lock_file, *temps), size,
                       counts.events, header, last)

    def _forget(self, path: str) -> None:
        """Drop what this backend keeps about a log it is removing."""
        with self._mutex:
            fd = self._fds.pop(path, None)
            self._known.pop(path, None)
            self._dirty.pop(path, None)
            self._unmarked.pop(path, None)
            self._unacked.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _forget_lock(self, lock: _FileLock) -> None:
        with self._mutex:
            self._locks.discard(lock)

    def _knows(self, log: str) -> bool:
        """Whether this backend saw the log there at the lock's acquire, or wrote it."""
        with self._mutex:
            return log in self._known

    def _park(self, path: str, fd: int, dev: int, ino: int) -> None:
        """Keep a released lock file's descriptor (unlocked) for the next acquire."""
        evicted: list[int] = []
        with self._mutex:
            old = self._idle.pop(path, None)
            if old is not None:
                evicted.append(old[0])
            self._idle[path] = (fd, dev, ino)
            while len(self._idle) > MAX_OPEN_LOGS:
                evicted.append(self._idle.pop(next(iter(self._idle)))[0])
        for stale in evicted:
            with contextlib.suppress(OSError):
                os.close(stale)  # unlocked: closing it releases nothing

    def close(self) -> None:
        """Close the append descriptors and the lock files', and release the locks still
        held. The backend stays usable (descriptors reopen on demand)."""
        with self._mutex:
            locks = list(self._locks)
        for lock in locks:
            lock.release()
        with self._mutex:
            fds = [*self._fds.values(), *(fd for fd, _, _ in self._idle.values())]
            self._fds.clear()
            self._idle.clear()
            self._known.clear()
        for fd in fds:
            os.close(fd)
