"""The JSONL backend's deleting: a session's files removed under its writer lock.

A session's log, its lock file and the temp files of its killed first writes removed
under its writer lock (its projection rows first: :mod:`.sidecar`), then the removal
made durable. A mixin of
:class:`~.jsonl.backend.JsonlBackend`, which owns the files and the locks.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, ClassVar

from msgspec import UnsetType

from ...._base.url_for import url_for
from ...._logformat.logfile import LogCounts, durable_header
from ...._schema.header import SessionHeader
from ....errors import LinkedLogError, LogFormatError
from ... import file_locks
from ...base import Deleted, DeleteStatus, SessionLockedError, WriterLock, not_found
from . import buckets, endmark, files
from .paths import encode_segment, lock_path

if TYPE_CHECKING:
    from .ends import OpenLogs
    from .sidecar import Sidecar
    from .write import LogWriter

__all__ = ["JsonlDelete", "cwd_of"]


def cwd_of(header: SessionHeader) -> str | None:
    # An empty cwd string is still a cwd (it has a bucket); only an absent one is not.
    return None if isinstance(header.cwd, UnsetType) else header.cwd


class JsonlDelete:
    """Deleting (:class:`~.jsonl.backend.JsonlBackend` sets what is declared here)."""

    root: str
    suffix: ClassVar[str]
    #: The scheme of a URL that opens a store of this kind, when its folder's path does
    #: not (a plain path is a plain JSONL store's): the compact backend's.
    _url_scheme: ClassVar[str | None] = None
    _logs: OpenLogs
    _writer: LogWriter
    _sidecar: Sidecar

    if TYPE_CHECKING:
        def acquire(self, header: SessionHeader) -> WriterLock: ...

        def _first_line(self, path: str) -> bytes | None: ...

        def _count(self, path: str) -> LogCounts: ...

        def list(self) -> list[SessionHeader]: ...

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove the session's log (from the first bucket holding it, as
        :meth:`load_stored` finds it), its lock file and the temp files of its killed
        first writes, under its writer lock (:meth:`acquire`), then make the removal
        durable (the bucket is fsynced). The bucket folder stays (a writer may be making
        a file in it). Only files named for exactly this id are touched: the encoding
        of ids into names is injective (:mod:`.paths`).

        :raises SessionLockedError: a writer holds the session.
        :raises SessionNotStoredError: no log of this id.
        :raises MisplacedLogError: the file named for this id holds another session
            (renamed by hand): it is left alone.
        :raises LogFormatError: its first line is not a session header.
        :raises LinkedLogError: the log, its lock or its bucket is a symbolic link.
        """
        path = buckets.find_log(self.root, session_id, self.suffix)
        if path is None:
            raise not_found(session_id, self._store_url())
        header = self._header_at(path)
        lock_file = lock_path(self.root, cwd_of(header), header.id)
        # Measured first: taking the lock may sweep them already (acquire).
        temps = self._temps(path, header.id)
        if dry_run:
            if os.path.islink(path):
                raise LinkedLogError(header.id, path, files.link_target(path))
            if not file_locks.lock_is_free(lock_file):
                raise SessionLockedError(header.id, f"lock {lock_file}")
            return self._report(header, path, lock_file, temps, "would-delete")
        lock = self.acquire(header)
        try:
            return self._unlink(session_id, path, header, lock_file, temps)
        finally:
            lock.release()

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        """:meth:`delete`, under the session's writer lock the caller took
        (:meth:`acquire`) and releases."""
        path = buckets.find_log(self.root, session_id, self.suffix)
        if path is None:
            raise not_found(session_id, self._store_url())
        header = self._header_at(path)
        lock_file = lock_path(self.root, cwd_of(header), header.id)
        # Taking the lock may have swept them already (acquire): named all the same.
        temps = {**getattr(lock, "swept", {}), **self._temps(path, header.id)}
        return self._unlink(session_id, path, header, lock_file, temps)

    def scrub(self) -> str:
        """Make what deletes left unreadable (:class:`~..capabilities.Scrubbable`): a
        deleted log is unlinked whole, so what is left is in the projection sidecar's
        database (:meth:`.sidecar.Sidecar.scrub`: vacuumed, its WAL truncated) and in
        the header cache, written anew without the headers of logs gone (a listing)."""
        try:
            done = self._sidecar.scrub()
        finally:  # (a sidecar scrub done in part raises: the cache is rewritten all the same)
            self.list()  # the header cache, written anew: it holds only the logs there
        return f"{done}; the header cache rewritten"

    def _store_url(self) -> str:
        """The store, as ``--store`` names it (for an error): its folder's path, or the
        URL that opens it as its kind."""
        return self.root if self._url_scheme is None else url_for(self._url_scheme, self.root)

    def _unlink(self, session_id: str, path: str, header: SessionHeader, lock_file: str,
                temps: dict[str, int]) -> Deleted:
        """Remove the log, its temp files and its lock file (held by the caller)."""
        if not files.exists(path):  # deleted meanwhile, by another store
            raise not_found(session_id, self._store_url())
        report = self._report(header, path, lock_file, temps, "deleted")
        # Its projection rows first: a session whose rows (its content, in part) cannot
        # be removed is not deleted; a crash after this leaves a log without rows,
        # which readers fold.
        self._sidecar.drop(header.id)
        self._forget(path)
        os.unlink(path)
        for temp in temps:
            files.unlink_quietly(temp)
        # Unlinked while held: a writer that opened it before locks a dead file,
        # sees it (acquire checks) and takes the lock on a new one.
        files.unlink_quietly(lock_file)
        files.fsync_dir(os.path.dirname(path))
        return report

    def _header_at(self, path: str) -> SessionHeader:
        line = self._first_line(path)
        if line is None:
            msg = f"{path} has no complete first line: it is no session log (left as it is)"
            raise LogFormatError(msg, path=path, line=1)
        header = durable_header(line, path=path)
        buckets.check_placed(self.root, path, header)
        return header

    @staticmethod
    def _temps(path: str, session_id: str) -> dict[str, int]:
        """The session's dead temp files beside its log, and its durable-end mark
        (:mod:`.endmark`), with their sizes."""
        found = {}
        for temp in [*buckets.temps_of(os.path.dirname(path), encode_segment(session_id)),
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
        self._logs.forget(path)
        self._writer.forget(path)
