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
- **Read the longest valid prefix.** :func:`scan_log` keeps every complete line up to
  the first hole (an unparsable line or a seq gap), raises when that hole lies inside
  the committed region (at or before the last ``turn/end``), and otherwise reports the
  rest as a torn tail for the coordinator to cut.

Beyond the reference, :meth:`JsonlBackend.acquire` takes an exclusive ``flock`` on a
``.lock`` file beside the log, so two writers (two processes, or two backends in one
process) cannot interleave appends to one session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import operator
import os
import secrets
import threading
from collections.abc import Sequence
from typing import Any, Final

import msgspec
from msgspec import UnsetType

from .._codec import ENCODER
from .._decode import decode_body, decode_line, opaque_from_wire
from .._header import SessionHeader
from .._json import find_non_json
from .._registry import EventRegistry
from ..errors import LogFormatError
from ..events import Event, OpaqueEvent
from .base import SessionLockedError, StoredLog, WriterLock
from .paths import encode_segment, lock_path, log_path

__all__ = ["JsonlBackend", "ScanResult", "scan_log"]

_EMPTY: Final = "empty or header-less session log"
_HEADER_NOT_JSON: Final = "corrupt session log: header line is not valid JSON"
_NOT_A_HEADER: Final = "corrupt session log: first line is not a session header"

#: How many append descriptors stay open between batches (least recently used go first).
MAX_OPEN_LOGS: Final = 128
#: ``list()`` reads first lines in chunks of this size, as the reference does.
_CHUNK: Final = 8192

_seq_of = operator.attrgetter("seq")
_generic = msgspec.json.Decoder()
_JSON_SPACE = b" \t\r\n"


# --- reading ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ScanResult:
    """What :func:`scan_log` keeps of a log.

    :ivar header: the session header (line 1).
    :ivar events: the longest valid prefix of the event lines, contiguous from seq 0.
    :ivar committed_bytes: where that prefix ends in the file (the end of the header
        line when no event is kept); any byte after it is a torn tail.
    :ivar jsonl: the kept event lines exactly as read, each ``\\n``-ended.
    """

    header: SessionHeader
    events: list[Event]
    committed_bytes: int
    jsonl: bytes


class _Hole:
    """Marks a line JavaScript's ``JSON.parse`` would refuse."""


_HOLE: Final = _Hole()


def _reject_constant(name: str) -> Any:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


def _parse_json(line: bytes) -> Any:
    """``line`` as JSON, accepting exactly what ``JSON.parse`` accepts, or :data:`_HOLE`.

    msgspec refuses lone surrogate escapes (JS accepts them), so such rare lines are
    read by the stdlib, told to refuse ``NaN``/``Infinity`` (which JS refuses).
    """
    try:
        return _generic.decode(line)
    except msgspec.DecodeError:
        pass
    try:
        return json.loads(line.decode("utf-8", "surrogatepass"), parse_constant=_reject_constant)
    except ValueError:  # includes UnicodeDecodeError and JSONDecodeError
        return _HOLE


def _as_int(value: Any) -> Any:
    # JSON ``0.0`` is the number 0 to JavaScript; our header holds ints.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float  # never bool (spec §14.15)


def _header_of(line: bytes, *, path: str | None) -> SessionHeader:
    """Line 1 as a session header, checked as the reference checks it.

    The core's :func:`._logfile.parse_header` is lenient (it reads hand-written logs
    without a version); a durable log must carry a numeric ``version``, so the line is
    decoded generically and checked field by field first.
    """
    obj = _parse_json(line)
    if obj is _HOLE:
        raise LogFormatError(_HEADER_NOT_JSON, path=path, line=1)
    if not (
        type(obj) is dict
        and obj.get("type") == "session"
        and _is_number(obj.get("version"))
        and type(obj.get("id")) is str
        and _is_number(obj.get("createdAt"))
    ):
        raise LogFormatError(_NOT_A_HEADER, path=path, line=1)
    # Extra keys are dropped; an optional key holding null counts as absent (our header
    # cannot hold null; the reference copies it).
    fields = {"type": "session", "version": _as_int(obj["version"]), "id": obj["id"],
              "createdAt": obj["createdAt"]}
    for key in ("cwd", "parentSession", "seedLength"):
        value = obj.get(key)
        if value is not None:
            fields[key] = _as_int(value)
    try:
        return msgspec.convert(fields, SessionHeader)
    except msgspec.ValidationError as exc:
        # A header the reference would read but ours cannot hold (a fractional version,
        # a non-string cwd): refused with the reference's words and the detail.
        msg = f"{_NOT_A_HEADER} ({exc})"
        raise LogFormatError(msg, path=path, line=1) from exc


def _header_or_none(line: bytes) -> SessionHeader | None:
    try:
        return _header_of(line, path=None)
    except LogFormatError:
        return None


def _fast_events(registry: EventRegistry, body: bytes) -> list[Event] | None:
    """The events of ``body`` when every line is a valid event with ``seq == index`` —
    the common case, checked at C speed — else ``None`` (the careful walk decides).

    ``decode_body`` decodes the whole block in one msgspec call. A line holding two
    JSON values (``{..},{..}``) would decode to two events, so the event count must
    equal the line count. A typed event's seq is an int; only an opaque event (kept
    verbatim) can hold a bool seq or, through the core's stdlib fallback, ``NaN``, so
    those two JavaScript differences are checked on opaque events only.
    """
    try:
        events = decode_body(registry, body)
    except (LogFormatError, msgspec.DecodeError):
        # DecodeError: the core's decode_line lets one out for an unknown type with a
        # lone surrogate escape; the careful walk reads such lines itself.
        return None
    n = len(events)
    if n != body.count(b"\n") or not all(map(operator.eq, map(_seq_of, events), range(n))):
        return None
    if OpaqueEvent in set(map(type, events)):
        opaque = [e for e in events if type(e) is OpaqueEvent]
        if any(type(e.seq) is bool for e in opaque):
            return None
        if (b"NaN" in body or b"Infinity" in body) and any(
            find_non_json(e.wire) is not None for e in opaque
        ):
            return None
    return events


def _event_of(registry: EventRegistry, line: bytes) -> Event | None:
    """One event line as an event, or ``None`` for a hole: a line ``JSON.parse`` refuses,
    or (a documented divergence, spec §14.16) a JSON value that is not an object."""
    try:
        event = decode_line(registry, line)
    except (LogFormatError, msgspec.DecodeError):
        wire = _parse_json(line)
        if wire is _HOLE:
            return None
        event = opaque_from_wire(wire)
    else:
        # The core's fallback parser reads NaN/Infinity, which JS refuses.
        if (
            type(event) is OpaqueEvent
            and (b"NaN" in line or b"Infinity" in line)
            and _parse_json(line) is _HOLE
        ):
            return None
    if not line.lstrip(_JSON_SPACE).startswith(b"{"):
        return None
    return event


def _js_string(event: Event) -> str:
    """An event's seq as JavaScript's template string would print it, for the gap error."""
    if type(event) is OpaqueEvent and "seq" not in event.wire:
        return "undefined"
    return _js_value(event.seq)


def _js_value(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is float and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, tuple | list):
        return ",".join("" if v is None else _js_value(v) for v in value)
    return "[object Object]"


def _careful_scan(
    registry: EventRegistry, data: bytes, start: int, end: int, *, path: str | None
) -> tuple[list[Event], int]:
    """The reference's walk (spec §9.4 steps 3-6), line by line: the kept events and
    where they end. Only logs with a hole or a gap come here."""
    parsed: list[Event | None] = []
    ends: list[int] = []
    last_turn_end = -1
    pos = start
    while pos < end:
        nl = data.index(b"\n", pos, end)
        event = _event_of(registry, data[pos:nl])
        if event is not None and event.type == "turn/end":
            last_turn_end = len(parsed)  # its own seq does not matter here
        parsed.append(event)
        ends.append(nl + 1)
        pos = nl + 1
    for i, event in enumerate(parsed):
        if event is None:
            if i <= last_turn_end:
                msg = f"corrupt session log: unparsable committed event at line {i + 1}"
                raise LogFormatError(msg, path=path, line=i + 2)
        else:
            seq = event.seq
            if _is_number(seq) and seq == i:
                continue
            if i <= last_turn_end:
                msg = (
                    f"corrupt session log: seq gap in committed region at line {i + 1} "
                    f"(expected {i}, got {_js_string(event)})"
                )
                raise LogFormatError(msg, path=path, line=i + 2)
        # A torn tail: keep what came before, drop this line and everything after it.
        return [e for e in parsed[:i] if e is not None], ends[i - 1] if i else start
    return [e for e in parsed if e is not None], ends[-1] if ends else start


def scan_log(data: bytes, registry: EventRegistry, *, path: str | None = None) -> ScanResult:
    """Read a JSONL log as the reference's ``scanLog`` does (spec §9.4).

    Only ``\\n``-ended lines count (a last fragment is never parsed). Line 1 must be a
    session header. Every event line is parsed on its own; the kept prefix is the
    longest run where line *i* parses and has ``seq == i``. A hole at or before the last
    ``turn/end`` is committed corruption; after it, a torn tail (its bytes, valid lines
    included, are past ``committed_bytes``).

    A well-formed log is decoded in one msgspec call and checked at C speed; only a log
    with a hole or a gap is walked line by line.

    :param path: the file, for error messages.
    :raises LogFormatError: no complete line, a bad header, or committed corruption
        (``line`` is the file line; the message names the 1-based event line, as the
        reference's does).
    """
    last_nl = data.rfind(b"\n")
    if last_nl < 0:
        raise LogFormatError(_EMPTY, path=path)
    header_end = data.find(b"\n")
    header = _header_of(data[:header_end], path=path)
    start, end = header_end + 1, last_nl + 1
    if start == end:
        return ScanResult(header, [], start, b"")
    body = data[start:end]
    events = _fast_events(registry, body)
    if events is not None:
        return ScanResult(header, events, end, body)
    events, committed = _careful_scan(registry, data, start, end, path=path)
    return ScanResult(header, events, committed, data[start:committed])


def _read_if_exists(path: str) -> bytes | None:
    """The file's bytes, or ``None`` when it does not exist. Only ENOENT means absent:
    a permission error, or a bucket that is a file (ENOTDIR), propagates (spec §14.23)."""
    try:
        f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed right below
    except FileNotFoundError:
        return None
    with f:
        return f.readall()


def _first_line(path: str) -> bytes | None:
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


# --- writing ----------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte (``os.write`` may write fewer than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # never for a regular file; guards against spinning forever
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def _cut(fd: int, size: int) -> OSError | None:
    """Truncate to ``size`` and fsync; the error, if that failed too."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError as exc:
        return exc
    return None


def _fsync_dir(path: str) -> None:
    """Make a directory's entries (a new file, a new subdirectory) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mkdirs(path: str) -> None:
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
        _mkdirs(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # created concurrently
            if not os.path.isdir(path):
                raise


def _unlink_quietly(path: str) -> None:
    # Best effort: a leftover .tmp is ignored by list() and by loads.
    with contextlib.suppress(OSError):
        os.unlink(path)


def _exists(path: str) -> bool:
    try:
        os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _cwd_of(header: SessionHeader) -> str | None:
    # An empty cwd string is still a cwd (it has a bucket); only an absent one is not.
    return None if isinstance(header.cwd, UnsetType) else header.cwd


def _refusal(session_id: str) -> FileExistsError:
    return FileExistsError(
        f'refusing to materialize "{session_id}": a log already exists on disk '
        f"(load/resume it instead)"
    )


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
                    line = _first_line(entry.path)
                    header = None if line is None else _header_or_none(line)
                    if header is not None:
                        found.append((header, entry.path))
    return found


class _FileLock:
    """A held ``flock`` on a session's ``.lock`` file; released by :meth:`release`, by
    closing the backend, or by the death of the process."""

    __slots__ = ("_backend", "_fd", "path")

    def __init__(self, fd: int, path: str, backend: JsonlBackend) -> None:
        self._fd = fd
        self.path = path
        self._backend = backend

    def release(self) -> None:
        """Unlock; a second call does nothing."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        self._backend._forget_lock(self)
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)  # closing the last descriptor would release it anyway

    def __repr__(self) -> str:
        state = "held" if self._fd >= 0 else "released"
        return f"<session writer lock {self.path} ({state})>"


class JsonlBackend:
    """Sessions as JSONL files under ``root`` (see the module docstring).

    Methods may be called from several threads, never twice at once for one session
    (the coordinator serializes per session).

    :param root: the directory holding every bucket; made absolute once, here, so a
        later ``chdir`` does not move the sessions.
    """

    name = "session-persistence-jsonl"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self._mutex = threading.Lock()
        # Append descriptors kept open between batches: reopening a log for every
        # batch costs more than the write. Checked out (popped) while in use, so that
        # evicting one never closes a descriptor another thread is writing to.
        self._fds: dict[str, int] = {}
        self._locks: set[_FileLock] = set()

    def __repr__(self) -> str:
        return f"JsonlBackend({self.root!r})"

    # -- reading --

    def _stored(self, data: bytes, registry: EventRegistry, path: str) -> StoredLog:
        scan = scan_log(data, registry, path=path)
        torn = scan.committed_bytes if scan.committed_bytes < len(data) else None
        return StoredLog(scan.header, scan.events, torn, scan.jsonl)

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session from the first bucket (in directory order) holding its log.

        :raises LogFormatError: committed corruption.
        :raises OSError: the root or a log cannot be read (other than "not found").
        """
        name = encode_segment(session_id) + ".jsonl"
        try:
            buckets = os.scandir(self.root)
        except FileNotFoundError:
            return None
        with buckets:
            for bucket in buckets:
                if not bucket.is_dir():
                    continue
                path = os.path.join(bucket.path, name)
                data = _read_if_exists(path)
                if data is not None:
                    return self._stored(data, registry, path)
        return None

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        """The session stored in exactly ``cwd``'s bucket (``None``: the no-cwd bucket).

        :raises NotADirectoryError: the bucket path is a file (not "absent").
        """
        path = log_path(self.root, cwd, session_id)
        data = _read_if_exists(path)
        return None if data is None else self._stored(data, registry, path)

    def location(self, header: SessionHeader) -> str:
        """The session's log file (where its cwd bucket puts it)."""
        return log_path(self.root, _cwd_of(header), header.id)

    def list(self) -> list[SessionHeader]:
        """The header of every ``*.jsonl`` log under the root, read from its first line
        only; files without a complete, valid header line are skipped. No order.

        :raises OSError: the root cannot be listed (a missing root lists nothing).
        """
        return [header for header, _ in list_logs(self.root)]

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
        path = log_path(self.root, _cwd_of(header), header.id)
        if materialized:
            self._append(path, jsonl)
        else:
            self._materialize(header, path, jsonl)

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """Cut the log back to ``torn`` bytes (when not ``None``; ``0`` would be a cut
        too), fsync, then append the ``closers`` like any batch."""
        path = log_path(self.root, _cwd_of(header), header.id)
        if torn is not None:
            if type(torn) is not int or torn < 0:
                msg = f"a JSONL torn marker is a byte offset, got {torn!r}"
                raise TypeError(msg)
            self._truncate(path, torn)
        if closers:
            self._append(path, jsonl)

    def _checkout(self, path: str) -> int:
        with self._mutex:
            fd = self._fds.pop(path, None)
        if fd is None:
            # No O_CREAT: a materialized log that vanished is an error, not a new
            # header-less file.
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
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
            os.close(stale)

    def _append(self, path: str, data: bytes) -> None:
        fd = self._checkout(path)
        try:
            size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException as exc:
            # Nothing of a failed batch may stay: the coordinator's cursor did not move,
            # and a retry writes the same seqs again.
            undo = _cut(fd, size)
            if undo is None:
                self._checkin(path, fd)
            else:
                os.close(fd)
                exc.add_note(f"rolling {path} back to {size} bytes failed too: {undo}")
            raise
        self._checkin(path, fd)

    def _truncate(self, path: str, size: int) -> None:
        fd = self._checkout(path)
        try:
            current = os.fstat(fd).st_size
            if size > current:
                msg = f"cannot cut {path} to {size} bytes: it holds only {current}"
                raise ValueError(msg)
            os.ftruncate(fd, size)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._checkin(path, fd)

    def _materialize(self, header: SessionHeader, path: str, jsonl: bytes) -> None:
        bucket = os.path.dirname(path)
        # Each new directory entry is made durable in its parent, down to the bucket.
        _mkdirs(self.root)
        _fsync_dir(os.path.dirname(self.root))
        _mkdirs(bucket)
        _fsync_dir(self.root)
        if _exists(path):
            raise _refusal(header.id)
        temp = f"{path}.{secrets.token_hex(6)}.tmp"
        # O_APPEND: once published, this descriptor is the log's append descriptor.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                     0o600)
        try:
            _write_all(fd, ENCODER.encode(header) + b"\n" + jsonl)
            os.fsync(fd)
            try:
                # A hard link, never a rename: it fails when the log exists, so a log
                # is never replaced.
                os.link(temp, path)
            except FileExistsError as exc:
                raise _refusal(header.id) from exc
            try:
                _fsync_dir(bucket)
            except BaseException:
                # Not durable, so not acknowledged: unpublish, so that a retry can
                # materialize again instead of being refused.
                _unlink_quietly(path)
                raise
        except BaseException:
            os.close(fd)
            _unlink_quietly(temp)
            raise
        _unlink_quietly(temp)
        self._checkin(path, fd)

    # -- the writer lock --

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's writer lock (``flock`` on ``<bucket>/<id>.lock``), without
        waiting. Every call opens its own descriptor, so two backends in one process
        exclude each other too (flock locks belong to open file descriptions).

        The lock file is created on demand and never deleted: deleting it would let a
        waiter lock an unlinked inode while a newcomer locks a fresh file.

        :raises SessionLockedError: another writer holds it.
        """
        path = lock_path(self.root, _cwd_of(header), header.id)
        _mkdirs(os.path.dirname(path))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionLockedError(header.id, f"lock {path}") from None
        except BaseException:
            os.close(fd)
            raise
        lock = _FileLock(fd, path, self)
        with self._mutex:
            self._locks.add(lock)
        return lock

    def _forget_lock(self, lock: _FileLock) -> None:
        with self._mutex:
            self._locks.discard(lock)

    def close(self) -> None:
        """Close the append descriptors and release the locks still held. The backend
        stays usable (descriptors reopen on demand)."""
        with self._mutex:
            fds = list(self._fds.values())
            self._fds.clear()
            locks = list(self._locks)
        for lock in locks:
            lock.release()
        for fd in fds:
            os.close(fd)
