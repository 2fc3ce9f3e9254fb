"""A SOURCE, read for display: a log file, or a session id in a store.

One rule, :func:`resolve_source`, for everything that reads a session: ``as_file`` reads
SOURCE as a path and ``as_id`` as a session id in the store (``store``, default:
:func:`~.durable.default_store_url`); without either, an existing path (not
a directory) is a file and anything else a session id, unless the store also holds a
session of that name: then the reader is told so rather than guess. A session id is
checked by the store's own id rule (``Backend.check_id``) before anything is read. Both
are read without writing anything and without taking the session's writer lock, so
inspecting a live session never disturbs its writer:

- a file is read leniently (:func:`~.logfile.read_lenient`): a version-less header is
  accepted, a line that is not JSON (a torn last line, a hole) is skipped with a
  warning, odd seqs are kept as they are. With ``recover`` it is read by the durable
  load rules instead (:func:`~.logfile.scan_log`: the torn tail is dropped, committed
  corruption is an error);
- a stored session is read with the backend's ``load_stored`` (torn tail dropped), never
  ``DurableStore.open``, which would repair the log and take the lock.

A store is opened by :func:`open_store`, through the one URL mapping
(:func:`~.durable.backend_for`, plugins' schemes included), and used only
through the :class:`~.._persistence.base.Backend` protocol.

In both cases the crash-repair closers a load *would* append
(:func:`~.repair.interrupted_turn_closers`) are computed, in memory only,
and reported as a warning; they are never added to the events shown.

Every refusal is an :class:`~..errors.InspectError`: :class:`~..errors.InspectUsageError`
(asked wrongly), :class:`~..errors.SessionNotFoundError`, or
:class:`~..errors.SourceReadError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InspectUsageError, SessionNotFoundError, SourceReadError
from .stores import installed_plugins, open_store, store_url
from .text import one_line, printable

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._persistence.base import Backend
    from .._persistence.listing import SessionName
    from .._schema.header import SessionHeader
    from .._schema.registry import EventRegistry
    from ..errors import SessionNotStoredError
    from ..events import Event
    from .files import Progress

__all__ = [
    "Source",
    "SourceSpec",
    "check_session_id",
    "is_log_file",
    "load_source",
    "not_found",
    "not_stored",
    "resolve_source",
    "scanned_source",
]


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """What names a session to read: ``dsh-session show SOURCE``'s arguments.

    :ivar source: a log file's path, or a session id in the store.
    :ivar store: the store's URL (default: :func:`store_url`'s).
    :ivar as_file: read ``source`` as a path, never a session id.
    :ivar as_id: read ``source`` as a session id, even when a file has its name.
    :ivar recover: read a file as a durable backend loads it (a torn tail dropped, a
        hole before the last ``turn/end`` an error).
    :ivar prefixes: an unambiguous id prefix names its session too (the command line's
        read commands; a session's name always does: :mod:`.lookup`).
    """

    source: str
    store: str | None = None
    as_file: bool = False
    as_id: bool = False
    recover: bool = False
    prefixes: bool = False


class Source:
    """A session read for display.

    :ivar header: its header.
    :ivar events: its events, in log order (seqs as found, gaps included).
    :ivar origin: where it was read from, for messages.
    :ivar warnings: what is odd about it, one line each.
    :ivar closers: what a durable load would append to close its last turn.
    :ivar retained: its store marks it never to be pruned (``retain``): a session read
        by id from a store; a log file is never marked.
    :ivar name: the name a plugin gives it (``name_session``), read from its store.
    """

    __slots__ = ("_retained_note", "closers", "events", "header", "name", "origin",
                 "retained", "warnings")

    def __init__(self, header: SessionHeader, events: list[Event], origin: str) -> None:
        self.header = header
        self.events = events
        self.origin = origin
        self.warnings: list[str] = []
        self.closers: list[Event] = []
        self.retained = False
        self.name: SessionName | None = None
        # The mark's note as people read it (the timeline's ``retainedNote``): set with
        # ``retained`` by the store's read, which alone has the keys to open a sealed one.
        self._retained_note: str | None = None



# --- files ------------------------------------------------------------------------------


def _read_file(path: str, reg: EventRegistry, recover: bool, progress: Progress | None,
               report: Callable[[str], None] | None) -> Source:
    from .._logformat.logfile import read_lenient
    from ..errors import LogFormatError
    from .files import read_log_file, unreadable_log

    data, odd = read_log_file(path, label="loading", progress=progress)
    if report is not None:
        for warning in odd:
            report(warning)
        odd = []
    if recover:
        source = scanned_source(path, data, reg)
        source.warnings[:0] = odd
        return source
    try:
        log = read_lenient(data, reg, path=path)
    except LogFormatError as exc:
        raise unreadable_log(path, exc, "is it a dsh-session log?") from exc
    source = Source(log.header, log.events, path)
    source.warnings.extend(odd)
    source.warnings.extend(f"line {line} is {what}: skipped" for line, what in log.skipped)
    if log.torn:
        source.warnings.append(
            f"the last line is incomplete ({log.torn} bytes, a torn write?): skipped; "
            f"--recover reads the log as a durable backend loads it"
        )
    _check_header(source)
    _check_seqs(source)
    _check_closers(source)
    return source


def scanned_source(path: str, data: bytes, reg: EventRegistry) -> Source:
    """The log file ``path`` (its bytes ``data``) read by the durable load rules.

    :raises SourceReadError: committed corruption, or a header the durable rules refuse.
    """
    from .._logformat.logfile import scan_log
    from ..errors import LogFormatError
    from .files import unreadable_log

    try:
        scan = scan_log(data, reg, path=path)
    except LogFormatError as exc:
        # A header the durable rules refuse (a hand-written one, without version) reads
        # without --recover: that is the hint, not restoring it.
        raise unreadable_log(path, exc, "without --recover, what can be read is shown",
                             header_hint=False) from exc
    source = Source(scan.header, scan.events, path)
    torn = len(data) - scan.committed_bytes
    if torn:
        source.warnings.append(
            f"a torn tail of {torn} byte(s) after event seq {len(scan.events) - 1} is "
            f"ignored (a load would cut it)"
        )
    _check_header(source)
    _check_closers(source)
    return source


def _check_header(source: Source) -> None:
    from msgspec import UNSET

    from .._schema.header import SEALED_FORMAT_VERSION, SESSION_FORMAT_VERSION

    version = source.header.version
    if version == SEALED_FORMAT_VERSION:  # never shown: its records are ciphertext
        from .._errors.crypt import HOW_TO_OPEN

        what = (source.origin if source.origin.startswith('session "')
                else f'{source.origin}: session "{source.header.id}"')
        msg = f"{what} is encrypted at rest"
        raise SourceReadError(msg, hint=f"read it by id from its store, with keys: "
                                        f"{HOW_TO_OPEN.partition('from the command line, ')[2]}")
    if version is UNSET:
        source.warnings.append(
            "the header has no format version (a hand-written log: the durable backends "
            "would refuse it)"
        )
    elif version != SESSION_FORMAT_VERSION:
        source.warnings.append(
            f"format version {version} (this build reads v{SESSION_FORMAT_VERSION})"
        )


def _check_seqs(source: Source) -> None:
    from .._schema.seq_text import event_seq, seq_mismatch

    # A seq of another JSON type than an integer is out of place, even when it equals
    # its index in Python (true == 1, 1.0 == 1): seeding refuses it.
    bad = [(i, e) for i, e in enumerate(source.events) if e.seq != i or type(e.seq) is not int]
    if bad:
        i, event = bad[0]
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        source.warnings.append(
            f"seqs are not contiguous from 0: event {i} ({event.type}) has seq "
            f"{seq_mismatch(event_seq(event), i)}{more}"
        )


def _check_closers(source: Source) -> None:
    from .._model.repair import interrupted_turn_closers

    try:
        source.closers = interrupted_turn_closers(source.events)
    except Exception as exc:  # odd opaque data must not stop a display command
        source.warnings.append(f"cannot tell whether the last turn is closed: {exc}")
        return
    if source.closers:
        source.warnings.append(
            "the last turn has no turn/end: the session is live, or its writer died "
            f"(a load would close it with {len(source.closers)} event(s), reason "
            "interrupted)"
        )


# --- stores -----------------------------------------------------------------------------


def not_found(session_id: str, url: str) -> SessionNotFoundError:
    """The error for a SOURCE that is neither a file nor a session in the store: a
    directory is named as one (it may be a store), anything else as neither. The store
    is named without its password."""
    from .._persistence.urls import printable_url

    url = printable_url(url)
    if os.path.isdir(session_id):
        msg = (f'{session_id} is a directory, not a log file, and no session "{session_id}" '
               f"is in {url}")
        return SessionNotFoundError(
            msg, session_id=session_id, location=url,
            hint=f"a directory of logs is a store: `dsh-session ls --store {session_id}` "
                 f"lists its sessions, and `--store {session_id} ID` reads one")
    msg = f'no session "{session_id}" in {url} (and no such file)'
    return SessionNotFoundError(msg, session_id=session_id, location=url,
                                hint=f"`dsh-session ls --store {url}` lists the sessions")


def not_stored(exc: SessionNotStoredError, url: str | None) -> SessionNotFoundError:
    """The read model's answer, for a person, to a store's "nothing is stored under this
    id" (``exc``, raised by a store's call), naming the store as ``url`` (as the command
    line named it; ``None``: as ``exc.location`` does, if it does). The store's error is
    for code; this one is the read model's, with its hint (docs/decisions.md). Raise it
    ``from exc``."""
    where = url if url is not None else exc.location
    if where is not None:
        from .._persistence.urls import printable_url

        where = printable_url(where)  # never with its password
    name = printable(exc.session_id)
    if where is None:
        return SessionNotFoundError(f'no session "{name}" in the store',
                                    session_id=exc.session_id, location="",
                                    hint="`dsh-session ls` lists the sessions")
    return SessionNotFoundError(f'no session "{name}" in {where}', session_id=exc.session_id,
                                location=where,
                                hint=f"`dsh-session ls --store {where}` lists the sessions")


def check_session_id(backend: Backend | None, session_id: str) -> None:
    """Refuse, as one line naming the rule, an id the store's backend cannot hold (the
    empty id, a lone surrogate, an id too long for PostgreSQL...); with no backend (a
    session read from a log file), an id no backend holds.

    :raises InspectUsageError: the id breaks the rule.
    """
    from ..errors import SessionIdError

    if backend is None:
        from .._persistence.base import check_common_id

        try:
            check_common_id(session_id, "log-file")
        except SessionIdError as exc:
            msg = f"invalid session id {session_id!r}: {exc.problem}"
            raise InspectUsageError(msg, hint=f"session ids are {exc.rule}") from None
        return
    try:
        backend.check_id(session_id)
    except SessionIdError as exc:
        shown = repr(session_id)
        if len(shown) > 60:
            shown = f"{shown[:40]}...{shown[-12:]} ({len(session_id)} characters)"
        msg = f"invalid session id {printable(shown)}: {exc.problem}"
        raise InspectUsageError(
            msg, hint=f"the {exc.backend} backend's session ids are {exc.rule}") from None


def _read_stored(text: str, url: str, reg: EventRegistry, prefixes: bool) -> Source:
    """The session ``text`` names in the store at ``url`` (:mod:`.lookup`'s rule), its
    name, and whether the store marks it never to be pruned: all read from one opening
    of the store."""
    from .._persistence.projections.naming import stored_name
    from .._persistence.urls import printable_url
    from ..errors import EncryptionError, LogFormatError
    from .lookup import find_session
    from .marks import session_mark

    backend = open_store(url)
    shown = printable_url(url)  # in every message and description: never its password
    session_id = text
    try:
        session_id = find_session(backend, text, shown, registry=reg,
                                  prefixes=prefixes) or text
        check_session_id(backend, session_id)
        stored = backend.load_stored(session_id, reg)
        if stored is None:
            raise not_found(session_id, shown)
        mark = session_mark(backend, session_id)
        name = stored_name(backend, stored.header, reg, plugins=installed_plugins())
    except LogFormatError as exc:
        path = getattr(exc, "path", None)
        where = f" ({path})" if path else ""
        msg = f'session "{session_id}" in {shown}{where}: {one_line(exc)}'
        hint = "show the file itself to see what can be read" if where else None
        raise SourceReadError(msg, hint=hint, path=path or None) from exc
    except EncryptionError as exc:
        raise SourceReadError(one_line(exc)) from exc
    except OSError as exc:
        msg = f"cannot read the store {shown}: {exc.strerror or exc}"
        raise SourceReadError(msg) from exc
    finally:
        backend.close()
    source = Source(stored.header, stored.events, f'session "{session_id}" in {shown}')
    if stored.torn is not None:
        source.warnings.append(
            f"a torn tail after event seq {len(stored.events) - 1} is ignored "
            "(opening the session would cut it)"
        )
    _check_header(source)
    _check_closers(source)
    source.retained, source._retained_note = mark.retained, mark.note
    source.name = name
    if mark.problem is not None:
        source.warnings.append(f"the store's retention ledger does not read ({mark.problem}): "
                               f"whether the session is marked never to be pruned is not known")
    return source


def is_log_file(source: str) -> bool:
    """Whether SOURCE names a log file: an existing path that is not a directory (a
    folder named like a session id, such as the current directory's ``demo``, does
    not hide the session)."""
    return os.path.exists(source) and not os.path.isdir(source)


def _stored_here(session_id: str, url: str) -> bool:
    """Whether the store at ``url`` holds ``session_id`` (a store that does not exist, or
    cannot hold such an id, holds none): one cheap lookup, no session loaded."""
    from ..errors import DshSessionError, InspectError

    try:
        backend = open_store(url)
    except InspectError:
        return False
    try:
        backend.check_id(session_id)
        return backend.tail_lines(session_id, 0) is not None
    except (DshSessionError, OSError):
        return False
    finally:
        backend.close()


def resolve_source(spec: SourceSpec) -> str:
    """How ``spec.source`` is read: ``"file"`` or ``"id"`` (the module's rule).

    :raises SourceReadError: ``as_file`` of a path that is no file.
    :raises InspectUsageError: a path that is a file and also a session id in the
        store, with neither ``as_file`` nor ``as_id``.
    """
    source = spec.source
    if spec.as_file:
        if not is_log_file(source):
            what = "a directory" if os.path.isdir(source) else "not found"
            msg = f"no log file {source} ({what})"
            raise SourceReadError(msg, hint="without --file, SOURCE may be a session id",
                                  path=source)
        return "file"
    if spec.as_id or not is_log_file(source):
        return "id"
    url = store_url(spec.store)
    if _stored_here(source, url):
        msg = f'"{source}" is both a log file here and a session in {url}'
        raise InspectUsageError(msg, hint=f"say which: --file {source} reads the file, "
                                          f"--id {source} the stored session")
    return "file"


def load_source(spec: SourceSpec, registry: EventRegistry, *,
                progress: Progress | None = None,
                report: Callable[[str], None] | None = None) -> Source:
    """The session ``spec`` names, read by the module's rule.

    :param progress: how to show a long read of a file (default: not at all).
    :param report: where a warning about a file's bytes themselves (a torn zstd frame)
        goes as soon as it is met (default: into the source's ``warnings``).
    :raises InspectError: the id breaks the store's rule, no such session or file, or
        its log does not read.
    """
    if resolve_source(spec) == "file":
        return _read_file(spec.source, registry, spec.recover, progress, report)
    return _read_stored(spec.source, store_url(spec.store), registry, spec.prefixes)
