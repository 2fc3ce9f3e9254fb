"""The JSONL backend's writer: how a batch reaches a log file durably.

It never rewrites a committed byte (the rules are :mod:`.jsonl.backend`'s
docstring's).

- **Materialize atomically** (:meth:`LogWriter.materialize`): a temp file, fsynced, then
  published with a hard link, which (unlike a rename) fails when the log exists.
- **Append or roll back** (:meth:`LogWriter.append`): one ``O_APPEND`` write and an
  fsync; when either fails, the file is cut back to its previous size before the error
  is raised, so a retry of the same seqs never duplicates them.
- **Never read a failed batch as history**: when the roll back fails too, the size the
  log had is marked beside it (:mod:`.endmark`) and remembered; the next write settles
  it first (cuts the log back and removes the mark), and when even marking fails, the
  error says the session is not durable.

What this writer knows of a log between two writes (its failed batches still to
settle, its unacknowledged first write) is its own; the append descriptors and the
ends of the logs written are :class:`~.ends.OpenLogs`'. How a kind of log's bytes
are written is the backend's (:class:`WriteFormat`).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import threading
from collections.abc import Callable

from ...._logformat.end import mark_of
from ...._schema.codec import ENCODER
from ...._schema.header import SessionHeader
from ....errors import LinkedLogError, PersistenceError, StoreWriteError
from . import endmark, files
from .buckets import make_store_folder
from .ends import Known, OpenLogs, last_line

__all__ = ["LogWriter", "WriteFormat"]


def _refusal(session_id: str) -> FileExistsError:
    """The error of a first write of a session whose log exists."""
    return FileExistsError(
        f'refusing to materialize "{session_id}": a log already exists on disk '
        f"(load/resume it instead)"
    )


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


@dataclasses.dataclass(frozen=True, slots=True)
class WriteFormat:
    """How one kind of JSONL log is written: the backend's file-format methods (the
    plain log's, or the compact backend's), handed to its writer.

    :ivar suffix: how a log file's name ends.
    :ivar prepare_root: called before a bucket is made in the root.
    :ivar encode: a batch's bytes (header and event lines) as written to the file.
    :ivar end_of: the bytes a log ends with after a batch (plain, written), enough to
        tell no one wrote after it; ``None``: too long to compare.
    :ivar seq_before: the seq of the last line in the file's first bytes (``None``: it
        is not cut there at a line's end).
    :ivar read_plain: the log's bytes, as the reference would write them (``None``: no
        such file, or not only whole units).
    """

    suffix: str
    prepare_root: Callable[[], None]
    encode: Callable[[bytes], bytes]
    end_of: Callable[[bytes, bytes], bytes | None]
    seq_before: Callable[[str, int], int | None]
    read_plain: Callable[[str], bytes | None]


class LogWriter:
    """The writes of one JSONL backend (see the module docstring). Called from several
    threads, never twice at once for one session (the coordinator serializes per
    session).

    :param root: the store's folder.
    :param logs: the backend's append descriptors and known ends.
    :param log_format: how its kind of log is written.
    """

    def __init__(self, root: str, logs: OpenLogs, log_format: WriteFormat) -> None:
        self.root = root
        self._logs = logs
        self._format = log_format
        self._mutex = threading.Lock()
        # Logs whose last rollback failed, with the size they had before the failed
        # batch: the next write to one settles it first (``_settle``), never blindly.
        self._dirty: dict[str, int] = {}
        # Those of them whose durable-end mark could not be written either (.endmark):
        # only this backend knows where their history ends; its own loads stop there.
        self._unmarked: dict[str, int] = {}
        # Logs published by a first write that failed afterwards and could not be
        # withdrawn, with the bytes published: a retry adopts them (``_republish``).
        self._unacked: dict[str, bytes] = {}

    def unmarked_end(self, path: str) -> int | None:
        """Where the log's history ends when a failed write could not mark it (only
        this writer knows); ``None`` otherwise."""
        with self._mutex:
            return self._unmarked.get(path)

    def unsettled(self, path: str) -> bool:
        """Whether a failed write to the log is still to be settled by the next one."""
        with self._mutex:
            return path in self._dirty or path in self._unmarked

    def reread(self, path: str) -> None:
        """The log was just read whole, with no durable-end mark: the coordinator
        re-anchors on what was read, so a failed batch's leftover is no longer this
        writer's to cut."""
        with self._mutex:
            self._dirty.pop(path, None)

    def forget(self, path: str) -> None:
        """Drop what this writer keeps about a log being removed."""
        with self._mutex:
            self._dirty.pop(path, None)
            self._unmarked.pop(path, None)
            self._unacked.pop(path, None)

    def append(self, session_id: str, path: str, plain: bytes, first_seq: int) -> None:
        data = self._format.encode(plain)
        # Until this write is durable, the log's end is not what was known.
        self._logs.unknown(path)
        try:
            fd = self._logs.checkout(self.root, session_id, path)
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
                self._logs.checkin(path, fd)
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
        self._logs.checkin(path, fd)

    def _remember(self, path: str, st: os.stat_result, size: int, plain: bytes,
                  written: bytes) -> None:
        """Note how a durable write left the log (:class:`~.ends.Known`): the file
        of ``st``, ``size`` bytes long, ending with ``written`` (``plain``'s bytes)."""
        tail = self._format.end_of(plain, written)
        if tail is not None:
            self._logs.remember(path, Known(st.st_dev, st.st_ino, size, tail,
                                            last_line(plain)))

    def _mark(self, session_id: str, path: str, size: int, exc: BaseException,
              why: str) -> None:
        """Mark ``size`` as where the log's history ends (:mod:`.endmark`), after a
        failed write whose bytes could not be cut (``why``), and say so on ``exc``.

        :raises StoreWriteError: marking failed too: the session is not durable (a
            process ending now leaves the failed bytes to be read as history); the
            error says so and what to do.
        """
        mark = mark_of(path)
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
        last = self._format.seq_before(path, durable) if size >= durable else None
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

    def truncate(self, session_id: str, path: str, size: int) -> None:
        self._logs.unknown(path)
        fd = self._logs.checkout(self.root, session_id, path)
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
        self._logs.checkin(path, fd)

    def materialize(self, header: SessionHeader, path: str, jsonl: bytes) -> None:
        bucket = os.path.dirname(path)
        # Each new directory entry is made durable in its parent, down to the bucket.
        make_store_folder(self.root)  # in a folder that exists, never above it
        files.fsync_dir(os.path.dirname(self.root))
        self._format.prepare_root()
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
        # <id>.jsonl.<hex>.tmp for either kind of log (buckets.sweep_temps finds them).
        temp = f"{path.removesuffix(self._format.suffix)}.jsonl.{secrets.token_hex(6)}.tmp"
        # O_APPEND: once published, this descriptor is the log's append descriptor.
        # Read-write, as every append descriptor (_checkout).
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                     0o600)
        written = self._format.encode(content)
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
        self._logs.checkin(path, fd)

    def replace(self, header: SessionHeader, path: str, jsonl: bytes) -> None:
        """Replace the log with the header and ``jsonl``, atomically: a temp file,
        fsynced, renamed over the log (a rename, which replaces: the log is meant to be
        replaced here), then the bucket fsynced. A crash leaves the old log or the new
        one; a temp file left by one is swept like a killed first write's. The writer
        lock is the caller's; the log's descriptor and what is known of it are dropped
        first (they are the old file's)."""
        bucket = os.path.dirname(path)
        if os.path.islink(path):
            raise LinkedLogError(header.id, path, files.link_target(path))
        content = ENCODER.encode(header) + b"\n" + jsonl
        temp = f"{path.removesuffix(self._format.suffix)}.jsonl.{secrets.token_hex(6)}.tmp"
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            try:
                files.write_all(fd, self._format.encode(content))
                os.fsync(fd)
            finally:
                os.close(fd)
            self.forget(path)
            self._logs.forget(path)  # its descriptor is the old file's
            os.rename(temp, path)
        except BaseException:
            files.unlink_quietly(temp)
            raise
        endmark.remove_mark(path)  # a mark measured the old file, not this one
        files.fsync_dir(bucket)

    def _republish(self, header: SessionHeader, path: str, content: bytes) -> bool:
        """Finish a first write that published the log but failed to make it durable or
        to withdraw it (``_unacked``): when the log still holds exactly what was
        published, and the retry's bytes start with it, make it durable and append the
        rest. ``False`` when the log is not that publication (the caller refuses)."""
        published = self._unacked.get(path)
        if published is None or not content.startswith(published):
            return False
        if self._format.read_plain(path) != published:
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
        self._logs.checkin(path, fd)
        rest = content[len(published):]
        if rest:
            # The retry's batch continues the published one (the same seqs first).
            seq = _first_seq_after(published)
            self.append(header.id, path, rest, seq)
        return True
