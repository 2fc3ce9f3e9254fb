"""The JSONL persistence backend: one append-only file per session.

Its files are byte-compatible with the reference's ``dsh-session-persistence-jsonl``
(spec plugins-persistence §9).

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
  log had is marked beside it (``<log>.durable``: :mod:`dsh_session_core._logformat.end`)
  before the error is raised, and every reader stops there; the next write (or a load's
  repair) cuts the log back to it and removes the mark. When even marking fails, the
  flush's error says the session is not durable, and nothing more is written to it
  until the cut succeeds.
- **Read the longest valid prefix.** :func:`~.logfile.scan_log` (the format's owner)
  keeps every complete line up to the first hole (an unparsable line or a seq gap),
  raises when that hole lies inside the committed region (at or before the last
  ``turn/end``), and otherwise reports the rest as a torn tail for the coordinator to
  cut.

This module is the backend class: its file-format methods and its reads; its deletes
are :mod:`.jsonl.delete`'s, its projection rows :mod:`.sidecar`'s.
The writes are :mod:`.write`'s, the writer lock :mod:`.jsonl.lock`'s, the append
descriptors and the ends of the logs written :mod:`.ends`'; the bytes are read by
:mod:`~dsh_session_core._logformat.logfile` (and, from their end,
:mod:`~dsh_session_core._logformat.tail`), the system calls are :mod:`.files`' and a
store folder's contents :mod:`.buckets`'.

Beyond the reference, :meth:`JsonlBackend.acquire` takes an exclusive ``flock`` on a
``.lock`` file beside the log, so two writers (two processes, or two backends in one
process) cannot interleave appends to one session (:mod:`.jsonl.lock`).

The compact backend (:mod:`.zstd`) is this class with another file format: the
methods under "the file format" below are where the two differ (a log's name, how a
batch's bytes are written, how a file is read back into the log's bytes).
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Collection, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar

from ...._logformat.end import durable_end
from ...._logformat.logfile import LogCounts, ScanResult, count_log, scan_log
from ...._logformat.tail import follow_file, tail_file
from ...._schema.header import SessionHeader
from ...._schema.registry import EventRegistry
from ....events import Event
from ...base import (
    LogNews,
    LogTail,
    SessionSummary,
    StoredLog,
    WriterLock,
    continued,
)
from . import buckets, files
from .delete import JsonlDelete, cwd_of
from .ends import MAX_TAIL, OpenLogs
from .lock import WriterLocks
from .paths import encode_segment, lock_path, log_path
from .sidecar import Sidecar, SidecarRows
from .write import LogWriter, WriteFormat

if TYPE_CHECKING:
    from ...._search import SearchHit, SearchQuery

__all__ = ["JsonlBackend"]


class JsonlBackend(JsonlDelete, SidecarRows):
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
        # What it keeps of the logs it writes, its writes, and its writer locks: each
        # with its own state (and lock), the format's methods bound here (the compact
        # backend's overrides).
        self._logs = OpenLogs()
        self._writer = LogWriter(self.root, self._logs, WriteFormat(
            self.suffix, self._prepare_root, self._encode, self._end_of, self._seq_before,
            self._read_plain))
        self._locks = WriterLocks(self.root, self._logs, self._prepare_root)
        # The projections' rows (the Projecting capability: SidecarRows).
        self._sidecar = Sidecar(self.root)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    # -- the file format: what the compact backend (.zstd) replaces --

    def _check_kind(self) -> None:
        """Refuse a root of the other kind (:func:`~.buckets.check_kind`)."""
        buckets.check_kind(self.root, compact=False)

    def _prepare_root(self) -> None:
        """Called before a bucket is made in the root (a plain root needs nothing)."""

    def _encode(self, plain: bytes) -> bytes:
        """A batch's bytes (header and event lines) as written to the file."""
        return plain

    def _end_of(self, plain: bytes, written: bytes) -> bytes | None:
        """The bytes a log ends with after a batch (``plain``, written as ``written``),
        enough to tell that no one wrote after it (:class:`~.ends.Known`): a plain
        log's last line with the newlines around it. ``None``: too long to compare."""
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
        end = durable_end(path)
        if end is None:
            return count_log(path)
        import io

        from ...._logformat.logfile import count_file

        with open(path, "rb") as f:
            return count_file(io.BytesIO(f.read(end)))

    def _tail(self, path: str, count: int) -> LogTail:
        """The log's last ``count`` lines (:func:`~._logformat.tail.tail_file`)."""
        # Where this backend's failed write could not mark the end, its reads stop
        # there as its loads do (a projection read would fold that batch's lines).
        return tail_file(path, count, self._writer.unmarked_end(path))

    def _lines_after(self, path: str, after: int, limit: int | None
                     ) -> builtins.list[bytes] | None:
        """The log's lines after seq ``after`` (:func:`~.ranges.lines_after`)."""
        from ...._logformat.ranges import lines_after

        return lines_after(path, after, limit, self._writer.unmarked_end(path))

    def _lines_of_types(self, path: str, types: Collection[str]
                        ) -> builtins.list[bytes] | None:
        """The log's lines of those types (:func:`~.ranges.lines_of_types`)."""
        from ...._logformat.ranges import lines_of_types

        return lines_of_types(path, types, self._writer.unmarked_end(path))

    # -- reading --

    def _end(self, path: str) -> int | None:
        """Where the log's history ends, when a failed write said so: its durable-end
        mark (:mod:`.end`), or the one this backend could not write."""
        end = self._writer.unmarked_end(path)
        return end if end is not None else durable_end(path)

    def _read(self, path: str) -> tuple[bytes, int | None] | None:
        """The log's bytes up to where its history ends, and that end when a failed
        write marked one (read first); ``None``: no file."""
        # The mark before the bytes: a writer that cuts the log back, removes the mark
        # and appends again meanwhile leaves this read a prefix of the history, never
        # the failed batch's bytes (:mod:`~dsh_session_core._logformat.end`).
        end = self._end(path)
        data = files.read_if_exists(path)
        if data is None:
            return None
        return (data, None) if end is None else (data[:end], end)

    def _stored(self, read: tuple[bytes, int | None], registry: EventRegistry, path: str
                ) -> StoredLog:
        data, end = read
        scan, torn = self._scan(data, registry, path)
        buckets.check_placed(self.root, path, scan.header)
        if end is not None and torn is None:
            # A failed batch may lie after the mark: a writer's load cuts the log there
            # and removes the mark (commit_repair), even when nothing follows it.
            torn = len(data)
        # What was just read is the log now: the coordinator re-anchors on it, so a
        # failed batch's leftover is no longer this backend's to cut, unless it was left
        # out of the reading (then the next write still cuts it first).
        if end is None:
            self._writer.reread(path)
        return StoredLog(scan.header, scan.events, torn, scan.jsonl)

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session from the first bucket (in directory order) holding its log.

        :raises LogFormatError: committed corruption.
        :raises OSError: the root or a log cannot be read (other than "not found").
        """
        name = encode_segment(session_id) + self.suffix
        # Only the id is known here, not the cwd whose hash names the log's bucket: each
        # bucket is tried in turn (load_live, which knows the cwd, goes straight to it).
        try:
            found = os.scandir(self.root)
        except FileNotFoundError:
            return None
        with found:
            for bucket in found:
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
        return log_path(self.root, cwd_of(header), header.id, self.suffix)

    def check_id(self, session_id: str) -> None:
        """The common rule only (:func:`~.base.check_common_id`): any other id has a
        file, a long one under a shortened name (:func:`~.paths.encode_segment`)."""
        from ...base import check_common_id

        check_common_id(session_id, self.name)

    def list(self) -> list[SessionHeader]:
        """The header of every ``*.jsonl`` log under the root, read from its first line
        only; files without a complete, valid header line are skipped. No order.

        :raises OSError: the root cannot be listed (a missing root lists nothing).
        """
        return [header for header, _ in
                buckets.list_logs(self.root, self.suffix, self._first_line)]

    def summaries(self) -> builtins.list[SessionSummary]:
        """Every log under the root with its counts (:func:`count_log`): each file found
        as :meth:`list` finds it, then read once, sequentially, in 1 MiB chunks, without
        parsing JSON; its last complete line, read from the end, gives the last activity.
        A torn last line is not counted, and flagged. O(store size) bytes read.

        :raises OSError: the root cannot be listed.
        """
        found = []
        for header, path in buckets.list_logs(self.root, self.suffix, self._first_line):
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
        :class:`~._logformat.tail.FilePosition`.

        :raises OSError: the log cannot be read.
        """
        path = buckets.find_log(self.root, session_id, self.suffix)
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
        from ...base import Backend

        path = buckets.find_log(self.root, session_id, self.suffix)
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
        same bytes, one small ``pread``: :class:`~.ends.Known`), no one else wrote: nothing
        to return. Otherwise the file is read (:meth:`_lines_since_read`). A log with a
        durable-end mark or a failed write of this backend's own still to settle is left
        to a whole load (it repairs them).

        :raises OSError: the log cannot be read.
        """
        path = self.location(header)
        if self._writer.unsettled(path):
            return None
        known = self._logs.known(path)
        if durable_end(path) is not None:
            return None
        if known is not None and self._logs.unchanged(path, known):
            return [] if continued([known.line], last) is not None else None
        return self._lines_since_read(header, path, last)

    def _lines_since_read(self, header: SessionHeader, path: str, last: Event
                          ) -> builtins.list[bytes] | None:
        """:meth:`lines_since` from the file: its last line read from its end (no one
        else wrote: nothing to return), else the lines from ``last`` on found by a binary
        search; ``None`` for a torn tail (the load cuts it)."""
        from ...._logformat.logfile import complete_end, last_lines
        from ...._logformat.ranges import lines_after

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
        from ...base import keep_types

        path = buckets.find_log(self.root, session_id, self.suffix)
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
        """Follow the log file itself (:func:`~._logformat.tail.follow_file`: polling its
        size)."""
        return follow_file(position, timeout=timeout)

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """Every hit of ``query``: a streaming scan of the logs (no index to go stale),
        in worker processes for a large store (:func:`~.scan.scan_files`)."""
        from .scan import scan_files

        return scan_files(self.root, self._search_paths(query), query)

    def _search_paths(self, query: SearchQuery) -> builtins.list[str]:
        """The log files a search reads: the query's sessions', else every one."""
        from .scan import log_files

        if query.sessions:
            return [path for sid in sorted(query.sessions)
                    if (path := buckets.find_log(self.root, sid, self.suffix)) is not None]
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
            self._writer.append(header.id, path, jsonl, events[0].seq)
        else:
            self._writer.materialize(header, path, jsonl)

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
            self._writer.truncate(header.id, path, torn)
        if closers:
            self._writer.append(header.id, path, jsonl, closers[0].seq)

    def rewrite(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes) -> None:
        """Replace the session's log with ``jsonl``, atomically (a temp file renamed over
        it: :meth:`~.write.LogWriter.replace`); the caller holds the writer lock. Its
        projection rows are dropped first (the store folds the new log).

        :raises PersistenceError: its rows cannot be dropped (nothing was changed).
        """
        self._sidecar.drop(header.id)
        self._writer.replace(header, self.location(header), jsonl)

    # -- the writer lock --

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's writer lock (``flock`` on ``<bucket>/<id>.lock``), without
        waiting. Every lock file is opened by its own descriptor, so two backends in one
        process exclude each other too (flock locks belong to open file descriptions).

        The lock file is created on demand, and deleted only by :meth:`delete`, while it
        holds the lock. A writer that opened it before that and locks it after locks an
        unlinked file: the lock is then checked to be on the file at the path
        (:func:`~.file_locks.same_file`), and taken again on the new one when it is not, so
        two writers never both hold a session.

        A released lock's descriptor is kept open, unlocked (:mod:`.jsonl.lock`):
        taking the lock again locks it and checks, by one ``stat`` each, that the lock
        file at the path is still the one it opened, that the bucket is no link and the
        log none either; when one is not so, the lock is taken as the first time.

        :raises SessionLockedError: another writer holds it.
        """
        lock = self._locks.acquire(header.id, lock_path(self.root, cwd_of(header), header.id),
                                   self.location(header))
        self._sidecar.forget(header.id)  # its writer reads its rows' marks anew
        return lock

    def close(self) -> None:
        """Close the append descriptors and the lock files', release the locks still
        held, and close the projection sidecar. The backend stays usable (descriptors
        reopen on demand)."""
        self._locks.close()
        self._logs.close()
        self._sidecar.close()
