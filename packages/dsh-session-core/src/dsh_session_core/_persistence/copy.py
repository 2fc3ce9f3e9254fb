"""Copying sessions from one store to another, resumably, and checking the copies.

:func:`copy_sessions` copies every session of a source backend (or the ids it is given)
into a destination backend of any kind (JSONL, SQLite, PostgreSQL, memory, or a
third-party one), and returns a :class:`CopyReport` with one :class:`SessionCopy` per
session. It is what ``dsh-session copy`` runs. The rules:

- **The source is only read.** Each session is read with ``load_stored`` (its torn tail
  is left alone, never repaired: only the valid prefix is copied); no writer lock is
  taken there, so a live session can be copied while its writer runs.
- **One writer per session.** Each session is written under the destination's writer
  lock (``acquire``); a session whose lock another writer holds is skipped
  (``locked``), never waited for.
- **Resumable, never overwriting.** When the destination already holds the session, its
  header must equal the source's and its events must be the source's first *k* events
  (the same log lines, byte for byte); then only the missing tail is appended
  (``resumed``), or nothing (``up-to-date``). Anything else is ``diverged`` and left
  untouched. Events are
  appended in batches of ``batch_size``: a crash loses at most one batch, and running
  the copy again continues where it stopped. A torn tail in the destination (a crash
  in the middle of a batch) is cut first, as loading the session would cut it.
- **Byte for byte.** Headers are kept as they are, and events are written with the log
  lines the source stored (``StoredLog.jsonl``), which every built-in backend gives
  back as it was appended (SQLite and PostgreSQL keep the lines their columns would not
  rebuild): a copy through any two stores is the same bytes, and ``dsh-session export``
  prints the same log from either store.
- **Never retried in vain.** Before a session is read, its id is checked against the
  destination's id rule (:meth:`~.base.Backend.check_id`): an id the destination cannot
  store (the empty id, a lone surrogate; PostgreSQL: a NUL, more than 2048 bytes) is
  ``unstorable``, and so is a session holding a value the destination cannot store
  (:class:`~dsh_session_core.errors.UnstorableError`, nothing of the batch written):
  copying it again can never succeed, so it is not reported as a ``failed`` to retry.
- **Checked.** With ``verify`` (the default), each session is loaded back from the
  destination, still under its lock, and must have the source's header, the same number
  of events with the same log lines byte for byte, and derive the same messages (or
  fail to derive with the same error); otherwise it is a ``mismatch``, whose error says
  which event differs and how (:func:`check_copy`).

A failure is confined to its session: it is reported, and the other sessions are still
copied. Only a source that cannot be listed stops the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Final, Literal, TypeAlias

import msgspec

from .._schema.codec import encode_line
from .._schema.header import SessionHeader
from .._schema.registry import EventRegistry
from ..errors import DshSessionError, SessionLockedError, UnstorableError
from ..jscompat import json_parse
from .base import Backend, StoredLog, stored_lines
from .capabilities import capabilities_of

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "CopyProgress",
    "CopyReport",
    "CopyStatus",
    "SessionCopy",
    "check_copy",
    "copy_sessions",
    "same_store",
]

#: Events per ``append_batch`` call: big enough that a batch costs little more than its
#: bytes, small enough that a crash loses little and the progress bar moves.
DEFAULT_BATCH_SIZE: Final = 2000

#: What happened to one session (the first four are successes):
#:
#: - ``copied``: it was new in the destination, every event was copied;
#: - ``resumed``: the destination held a prefix of it; the rest was appended;
#: - ``up-to-date``: the destination already held all of it;
#: - ``empty``: the source holds no event of it (nothing to copy: a session is stored
#:   from its first event on);
#: - ``missing``: no such session in the source;
#: - ``diverged``: the destination holds something else under its id (left untouched);
#: - ``locked``: another writer holds its writer lock in the destination;
#: - ``mismatch``: the copy was written but does not check out (see ``verify``);
#: - ``unstorable``: the destination cannot store its id, or a value of it (the error
#:   says which): copying it again cannot succeed;
#: - ``failed``: it could not be read or written (an I/O error...); running the copy
#:   again retries it.
CopyStatus: TypeAlias = Literal[
    "copied", "resumed", "up-to-date", "empty", "missing", "diverged", "locked", "mismatch",
    "unstorable", "failed",
]

_DONE: Final = frozenset({"copied", "resumed", "up-to-date", "empty"})


@dataclasses.dataclass(slots=True)
class SessionCopy:
    """What the copy did with one session (in a dry run: what it would do).

    :ivar session_id: the session.
    :ivar status: what happened (see :data:`CopyStatus`).
    :ivar events: the events the source holds (its valid prefix).
    :ivar existing: the events the destination held before.
    :ivar copied: the events appended now (or that a dry run would append).
    :ivar source_torn: the source log has a torn tail, which was not copied.
    :ivar cut_destination_tail: a torn tail in the destination was cut before appending.
    :ivar verified: the copy was loaded back and checked.
    :ivar error: why it is not copied, one line; ``None`` on success.
    :ivar cause: the exception behind ``error``, if any.
    """

    session_id: str
    status: CopyStatus = "failed"
    events: int = 0
    existing: int = 0
    copied: int = 0
    source_torn: bool = False
    cut_destination_tail: bool = False
    verified: bool = False
    error: str | None = None
    cause: BaseException | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the session is (or, in a dry run, would be) complete in the
        destination."""
        return self.status in _DONE

    def to_wire(self) -> dict[str, Any]:
        """A JSON-ready document (camelCase keys), as ``dsh-session copy --json`` prints."""
        return {
            "id": self.session_id, "status": self.status, "events": self.events,
            "existing": self.existing, "copied": self.copied, "sourceTorn": self.source_torn,
            "cutDestinationTail": self.cut_destination_tail, "verified": self.verified,
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class CopyReport:
    """What :func:`copy_sessions` did, session by session.

    :ivar sessions: one entry per session, in the order they were copied.
    :ivar dry_run: nothing was written; the entries say what would be.
    :ivar verify: the copies were loaded back and checked.
    """

    sessions: tuple[SessionCopy, ...]
    dry_run: bool
    verify: bool

    @property
    def ok(self) -> bool:
        """Whether every session is (or would be) complete in the destination."""
        return all(s.ok for s in self.sessions)

    @property
    def copied_events(self) -> int:
        """How many events were (or would be) appended, over every session."""
        return sum(s.copied for s in self.sessions)

    def count(self, *statuses: CopyStatus) -> int:
        """How many sessions have one of ``statuses``."""
        return sum(s.status in statuses for s in self.sessions)

    def to_wire(self) -> dict[str, Any]:
        """A JSON-ready document (camelCase keys), as ``dsh-session copy --json`` prints."""
        by_status: dict[str, int] = {}
        for s in self.sessions:
            by_status[s.status] = by_status.get(s.status, 0) + 1
        return {
            "ok": self.ok, "dryRun": self.dry_run, "verify": self.verify,
            "copiedEvents": self.copied_events, "byStatus": by_status,
            "sessions": [s.to_wire() for s in self.sessions],
        }


@dataclasses.dataclass(frozen=True, slots=True)
class CopyProgress:
    """Where a copy stands, handed to the ``progress`` callback of :func:`copy_sessions`
    when a session starts and after each batch.

    :ivar session_id: the session being copied.
    :ivar index: its position in the run, from 1.
    :ivar count: how many sessions the run copies.
    :ivar done: the session's events now in the destination.
    :ivar total: the session's events in the source.
    """

    session_id: str
    index: int
    count: int
    done: int
    total: int


class _Refused(Exception):
    """A session is not copied, for a reason that is not an exception of its own; the
    message says why."""

    status: ClassVar[CopyStatus] = "failed"


class _Missing(_Refused):
    status = "missing"


class _Diverged(_Refused):
    status = "diverged"


class _Mismatch(_Refused):
    status = "mismatch"


def same_store(a: Backend, b: Backend) -> bool:
    """Whether two backends are the same store: the same object, or two backends with
    the same :meth:`~.base.Backend.store_identity` (the same folder or database file,
    the same PostgreSQL database however its URL is spelt). Two in-memory backends are
    two stores."""
    if a is b:
        return True
    identity = a.store_identity()
    return identity is not None and identity == b.store_identity()


def copy_sessions(
    source: Backend,
    destination: Backend,
    session_ids: Iterable[str] | None = None,
    *,
    registry: EventRegistry | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    verify: bool = True,
    dry_run: bool = False,
    progress: Callable[[CopyProgress], None] | None = None,
    on_done: Callable[[SessionCopy], None] | None = None,
) -> CopyReport:
    """Copy sessions from ``source`` into ``destination`` (see the module docstring for
    the rules). Neither backend is closed.

    :param session_ids: the sessions to copy (default: every session of the source,
        oldest first).
    :param registry: the event types to decode into (default: the installed plugins');
        events of other types are copied verbatim all the same.
    :param batch_size: events per append (at least 1).
    :param verify: load each copy back and check it.
    :param dry_run: write nothing and take no lock; report what would be copied.
    :param progress: called with a :class:`CopyProgress` as the copy advances.
    :param on_done: called with each session's :class:`SessionCopy` as it is done.
    :raises ValueError: the two backends are the same store, or ``batch_size < 1``.
    :raises OSError: the source's sessions cannot be listed.
    """
    if batch_size < 1:
        msg = f"batch_size must be at least 1, got {batch_size}"
        raise ValueError(msg)
    if same_store(source, destination):
        msg = (
            f"the source and the destination are the same store "
            f"({source.location(SessionHeader(version=0, id='-', created_at=0))}): "
            f"copy into another one"
        )
        raise ValueError(msg)
    if registry is None:
        from .._plugins.manager import PluginHooks, create_plugin_manager

        registry = PluginHooks(create_plugin_manager()).build_registry()
    ids = _listed(source) if session_ids is None else list(dict.fromkeys(session_ids))
    copier = _Copier(source, destination, registry, batch_size, verify, dry_run, progress)
    results = []
    for i, sid in enumerate(ids, 1):
        result = copier.copy(sid, i, len(ids))
        results.append(result)
        if on_done is not None:
            on_done(result)
    return CopyReport(tuple(results), dry_run, verify and not dry_run)


def _listed(source: Backend) -> list[str]:
    """The source's session ids, oldest first (then by id), each once."""

    def key(header: SessionHeader) -> tuple[float, str]:
        created = header.created_at
        return (float(created) if isinstance(created, int | float) else 0.0, header.id)

    return list(dict.fromkeys(h.id for h in sorted(source.list(), key=key)))


def _describe(exc: BaseException) -> str:
    """An exception as one line: its class and its message."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _lines(stored: StoredLog) -> list[bytes]:
    """The log line of each event (without its newline), as the source stored them."""
    return stored_lines(stored)


class _Copier:
    """Copies one session at a time with the settings of one run."""

    def __init__(
        self,
        source: Backend,
        destination: Backend,
        registry: EventRegistry,
        batch_size: int,
        verify: bool,
        dry_run: bool,
        progress: Callable[[CopyProgress], None] | None,
    ) -> None:
        self.source = source
        self.destination = destination
        self.registry = registry
        self.batch_size = batch_size
        self.verify = verify
        self.dry_run = dry_run
        self.progress = progress

    def copy(self, session_id: str, index: int, count: int) -> SessionCopy:
        out = SessionCopy(session_id)
        try:
            self._copy(out, index, count)
        except _Refused as exc:
            out.status, out.error = exc.status, str(exc)
        except SessionLockedError as exc:
            out.status, out.cause = "locked", exc
            out.error = f"another writer holds its lock in the destination ({exc.holder})"
        except UnstorableError as exc:  # its id or a value: never stored by a retry
            out.status, out.cause = "unstorable", exc
            out.error = _describe(exc)
        except Exception as exc:  # confined to this session: the others are still copied
            out.status, out.cause = "failed", exc
            out.error = _describe(exc)
        return out

    def _copy(self, out: SessionCopy, index: int, count: int) -> None:
        sid = out.session_id
        self.destination.check_id(sid)  # before anything is read or written
        try:
            stored = self.source.load_stored(sid, self.registry)
        except Exception as exc:
            out.cause = exc
            msg = f"cannot read it from the source: {_describe(exc)}"
            raise _Refused(msg) from exc
        if stored is None:
            msg = "no such session in the source"
            raise _Missing(msg)
        out.events, out.source_torn = len(stored.events), stored.torn is not None
        if not stored.events:
            out.status = "empty"
            return
        lines = _lines(stored)
        if self.dry_run:
            there = self.destination.load_stored(sid, self.registry)
            out.existing = _prefix_length(there, stored, lines)
            out.cut_destination_tail = there is not None and there.torn is not None
            out.copied = out.events - out.existing
            out.status = _done_status(out)
            return
        lock = self.destination.acquire(stored.header)
        try:
            self._write(out, stored, lines, index, count)
            if self.verify:
                self._verify(stored, lines)
                out.verified = True
        finally:
            lock.release()

    def _write(
        self, out: SessionCopy, stored: StoredLog, lines: list[bytes], index: int, count: int
    ) -> None:
        """Append what the destination lacks, batch by batch (the lock is held)."""
        dst = self.destination
        there = dst.load_stored(out.session_id, self.registry)
        out.existing = _prefix_length(there, stored, lines)
        if there is not None and there.torn is not None:
            dst.commit_repair(there.header, there.torn, [], b"")  # cut only: no closers
            out.cut_destination_tail = True
        materialized = there is not None
        total = len(stored.events)
        self._report(out.session_id, index, count, out.existing, total)
        for start in range(out.existing, total, self.batch_size):
            stop = min(start + self.batch_size, total)
            jsonl = b"\n".join(lines[start:stop]) + b"\n"
            dst.append_batch(stored.header, stored.events[start:stop], jsonl, materialized)
            materialized = True
            out.copied += stop - start
            self._report(out.session_id, index, count, stop, total)
        if out.copied or out.cut_destination_tail:
            # The destination's projection rows, where it keeps them, folded from the
            # whole copy (under its lock): readers need not fold it until a write.
            from .projections.rebuild import rebuild_rows

            rebuild_rows(capabilities_of(dst), self.registry, stored.header, stored.events)
        out.status = _done_status(out)

    def _report(self, session_id: str, index: int, count: int, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(CopyProgress(session_id, index, count, done, total))

    def _verify(self, stored: StoredLog, lines: list[bytes]) -> None:
        """Load the copy back and check it against the source.

        :raises _Mismatch: saying what differs.
        """
        sid = stored.header.id
        copy = self.destination.load_stored(sid, self.registry)
        problem = check_copy(stored, copy, self.registry, lines)
        if problem is not None:
            msg = f"the copy does not check out: {problem}"
            raise _Mismatch(msg)


def _done_status(out: SessionCopy) -> CopyStatus:
    if out.existing == 0:
        return "copied"
    return "resumed" if out.copied else "up-to-date"


def _header_difference(a: SessionHeader, b: SessionHeader) -> str | None:
    """The first header field that differs, as ``name: a vs b``, or ``None``."""
    for name in a.__struct_fields__:
        mine, theirs = getattr(a, name), getattr(b, name)
        if mine != theirs:  # 1000 == 1000.0: a backend may store a number either way
            return f"{name} {_shown(mine)} in the source, {_shown(theirs)} in the destination"
    return None


def _shown(value: object) -> str:
    from msgspec import UNSET

    return "absent" if value is UNSET else encode_line(value).decode()


_sorted_keys = msgspec.json.Encoder(order="sorted")


def _value(line: bytes) -> bytes | None:
    """A log line as a JSON value, re-encoded with every object's keys sorted (two lines
    hold the same value iff these are equal, whatever their key order and spelling), or
    ``None`` when it is not JSON."""
    try:
        return _sorted_keys.encode(msgspec.json.decode(line))
    except msgspec.DecodeError:  # lone surrogate escapes, which msgspec refuses
        import json

        try:
            text = json.dumps(json_parse(line), sort_keys=True, separators=(",", ":"))
        except ValueError:
            return None
        return b"~" + text.encode()  # ASCII (escaped); "~" keeps it apart from msgspec's


def _first_difference(mine: Sequence[bytes], theirs: Sequence[bytes]) -> int | None:
    """The index of the first event whose log line differs between two lists, byte for
    byte (a shorter list differs where it ends), or ``None``."""
    if mine == theirs:
        return None
    for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if a != b:
            return i
    return None if len(mine) == len(theirs) else min(len(mine), len(theirs))


_SAME_VALUE: Final = "the same JSON value written otherwise: key order or spelling"


def _same_value(mine: bytes, theirs: bytes) -> bool:
    """Whether two log lines hold the same JSON value."""
    value = _value(mine)
    return value is not None and value == _value(theirs)


def _how(mine: bytes, theirs: bytes) -> str:
    """How two log lines of one event differ: whether they still hold the same JSON
    value, and where their bytes part, with what each has there."""
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
              min(len(mine), len(theirs)))

    def near(line: bytes) -> str:
        shown = line[max(at - 20, 0):at + 30].decode(errors="replace")
        return f"{'...' if at > 20 else ''}{shown}{'...' if at + 30 < len(line) else ''}"

    what = _SAME_VALUE if _same_value(mine, theirs) else "another value"
    return (f"{what}; {len(mine)} bytes in the source, {len(theirs)} in the destination, "
            f"apart from byte {at}: {near(mine)!r} against {near(theirs)!r}")


def _prefix_length(there: StoredLog | None, stored: StoredLog, lines: list[bytes]) -> int:
    """How many of the source's events the destination already holds.

    :raises _Diverged: the destination holds something that is not a prefix of the
        source (another header, other events, more events).
    """
    if there is None:
        return 0
    differs = _header_difference(stored.header, there.header)
    if differs is not None:
        msg = f"the destination holds another session under this id (header: {differs})"
        raise _Diverged(msg)
    k = len(there.events)
    if k > len(stored.events):
        msg = (
            f"the destination holds {k} events, more than the {len(stored.events)} the "
            f"source holds"
        )
        raise _Diverged(msg)
    theirs = _lines(there)
    at = _first_difference(lines[:k], theirs)
    if at is not None:
        same = f" ({_SAME_VALUE})" if _same_value(lines[at], theirs[at]) else ""
        msg = (
            f"the destination's event seq {at} differs from the source's{same}: it is not "
            f"a prefix of the source"
        )
        raise _Diverged(msg)
    return k


def _derived(log: StoredLog, registry: EventRegistry) -> bytes:
    """The messages a log derives to, as JSON; or the error deriving them raises."""
    from .._model.session import Session

    try:
        session = Session(log.header.id, log.events, log.header, registry=registry)
        return encode_line(session.derive_messages())
    except DshSessionError as exc:
        return f"error: {_describe(exc)}".encode()


def check_copy(
    original: StoredLog,
    copy: StoredLog | None,
    registry: EventRegistry,
    lines: list[bytes] | None = None,
) -> str | None:
    """What is wrong with ``copy`` as a copy of ``original`` (the valid prefix of a
    source log), one line; ``None`` when it checks out: the same header, no torn tail,
    as many events with the same log lines, byte for byte, and the same derived messages
    (or the same derivation error). A line that differs is named by its event's seq,
    with where its bytes part and whether it still holds the same JSON value.

    :param lines: the original's log lines, when already at hand.
    """
    if copy is None:
        return "it is not in the destination"
    differs = _header_difference(original.header, copy.header)
    if differs is not None:
        return f"the header differs ({differs})"
    if copy.torn is not None:
        return "a torn tail follows it in the destination"
    n, m = len(original.events), len(copy.events)
    if n != m:
        return f"{m} events in the destination, {n} in the source"
    mine = _lines(original) if lines is None else lines
    theirs = _lines(copy)
    at = _first_difference(mine, theirs)
    if at is not None:
        return f"event seq {at} differs: {_how(mine[at], theirs[at])}"
    if _derived(original, registry) != _derived(copy, registry):
        return "it derives other messages than the source"
    return None
