"""The SOURCE of the session commands: a log file, or a session id in a store.

One rule, :func:`resolve`, for every command that reads a session: ``--file`` reads
SOURCE as a path and ``--id`` as a session id in ``--store URL`` (default:
:func:`~.._persistence.urls.default_store_url`); without either, an existing path (not a
directory) is a file and anything else a session id, unless the store also holds a
session of that name: then the command says so rather than guess. A session id is
checked by the store's own id rule (``Backend.check_id``) before anything is read. Both are read
without writing anything and without taking the session's writer lock, so inspecting a
live session never disturbs its writer:

- a file is read leniently (:func:`~.._logfile.read_lenient`): a version-less header is
  accepted, a line that is not JSON (a torn last line, a hole) is skipped with a
  warning, odd seqs are kept as they are. With ``--recover`` it is read by the durable
  load rules instead (:func:`~.._logfile.scan_log`: the torn tail is dropped, committed
  corruption is an error);
- a stored session is read with the backend's ``load_stored`` (torn tail dropped), never
  ``DurableStore.open``, which would repair the log and take the lock.

A store is opened by :func:`open_backend`, through the one URL mapping
(:func:`~.._persistence.opening.backend_for`, plugins' schemes included), and used only
through the :class:`~.._persistence.base.Backend` protocol.

In both cases the crash-repair closers a load *would* append
(:func:`~.._persistence.repair.interrupted_turn_closers`) are computed, in memory only, and reported
as a warning; they are never added to the events shown.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from .support import EXIT_USAGE, Failure, one_line, read_file, unreadable_log, write
from .term import Style, printable

if TYPE_CHECKING:
    from .._header import SessionHeader
    from .._persistence.base import Backend
    from .._registry import EventRegistry
    from ..errors import StoreFolderError
    from ..events import Event

__all__ = [
    "Source",
    "add_source_arguments",
    "check_session_id",
    "folder_failure",
    "is_log_file",
    "load_source",
    "not_found",
    "open_backend",
    "out_json",
    "out_text",
    "payload",
    "read_bytes",
    "resolve",
    "store_url",
    "warn",
]


class Source:
    """A session read for display.

    :ivar header: its header.
    :ivar events: its events, in log order (seqs as found, gaps included).
    :ivar origin: where it was read from, for messages.
    :ivar warnings: what is odd about it, one line each.
    :ivar closers: what a durable load would append to close its last turn.
    """

    __slots__ = ("closers", "events", "header", "origin", "warnings")

    def __init__(self, header: SessionHeader, events: list[Event], origin: str) -> None:
        self.header = header
        self.events = events
        self.origin = origin
        self.warnings: list[str] = []
        self.closers: list[Event] = []


def warn(message: str) -> None:
    """One warning line on stderr."""
    style = Style.for_stream(sys.stderr)
    sys.stderr.write(f"dsh-session: {style('warning:', 'yellow')} {printable(message)}\n")
    sys.stderr.flush()


def out_text(text: str) -> None:
    """Text on stdout; what UTF-8 cannot hold (a lone surrogate) becomes ``?``."""
    write(text.encode("utf-8", "replace"))


def out_json(doc: object) -> None:
    """One JSON document on stdout, on one line (lone surrogates escaped as JS does)."""
    from .._codec import encode_line

    write(encode_line(doc) + b"\n")


def payload(event: Event) -> dict[str, Any]:
    """An event's ``data`` in its wire shape, or ``{}`` when it is not an object (an
    opaque event may hold anything there)."""
    from .describe import wire_of

    data = wire_of(event.data)
    return data if isinstance(data, dict) else {}


# --- files ------------------------------------------------------------------------------


def read_bytes(path: str, label: str = "reading") -> bytes:
    """A whole file, with a progress bar on a terminal when it is big."""
    return read_file(path, label)


def _read_file(path: str, reg: EventRegistry, recover: bool) -> Source:
    from .._logfile import read_lenient
    from ..errors import LogFormatError

    data = read_bytes(path, "loading")
    if recover:
        return _scanned(path, data, reg)
    try:
        log = read_lenient(data, reg, path=path)
    except LogFormatError as exc:
        raise unreadable_log(path, exc, "is it a dsh-session log?") from exc
    source = Source(log.header, log.events, path)
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


def _scanned(path: str, data: bytes, reg: EventRegistry) -> Source:
    from .._logfile import scan_log
    from ..errors import LogFormatError

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

    from .._header import SESSION_FORMAT_VERSION

    version = source.header.version
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
    from .._seq_text import event_seq, seq_mismatch

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
    from .._persistence.repair import interrupted_turn_closers

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


def store_url(args: argparse.Namespace) -> str:
    from .._persistence.urls import default_store_url

    url: str | None = getattr(args, "store", None)
    return url if url else default_store_url()


def open_backend(url: str, *, must_exist: bool = True, empty_if_missing: bool = False
                 ) -> Backend:
    """The backend of a store, for reading (any scheme a plugin opens too).

    :param must_exist: refuse a store that does not exist rather than create it (a
        SQLite file, a PostgreSQL database without dsh-session's tables).
    :param empty_if_missing: with ``must_exist``, an empty in-memory backend for a store
        that does not exist (what a dry run would find), instead of a failure.
    :raises Failure: a bad URL (usage), a store that lives in its backend object only
        (``memory:``: nothing outlives its process, so there is nothing to read and
        nowhere to fork to), a database that cannot be opened, or, with ``must_exist``,
        a store that does not exist.
    """
    from .._persistence.opening import backend_for
    from .._persistence.urls import printable_url
    from ..errors import DshSessionError, StoreFolderError, StoreNotFoundError
    from .support import plugin_manager

    try:
        backend = backend_for(url, create=not must_exist, plugins=plugin_manager)
    except StoreFolderError as exc:
        raise folder_failure(exc) from exc
    except StoreNotFoundError as exc:
        if empty_if_missing:
            return backend_for("memory:")
        raise Failure(str(exc), hint="check the URL: the database the sessions were "
                                     "written to") from exc
    except ValueError as exc:  # an unknown scheme
        raise Failure(str(exc), EXIT_USAGE) from exc
    except (DshSessionError, OSError) as exc:  # e.g. another schema version
        msg = f"cannot open the store {printable_url(url)}: {one_line(exc)}"
        raise Failure(msg) from exc
    except ImportError as exc:  # the PostgreSQL backend without psycopg
        raise Failure(str(exc), hint="pip install 'dsh-session[postgresql]'") from exc
    except Exception as exc:
        if type(exc).__module__.startswith("psycopg"):  # a PostgreSQL driver's error
            msg = f"cannot open the store {printable_url(url)}: {one_line(exc)}"
            raise Failure(msg, hint="check that the server runs, and the URL's host, port, "
                                    "user and database") from exc
        import sqlite3  # already loaded when a SQLite store raised it

        if not isinstance(exc, sqlite3.Error):
            raise
        msg = f"cannot open the store {url}: {exc}"
        raise Failure(msg) from exc
    if backend.store_identity() is None:  # lives in this object only
        backend.close()
        msg = f"a {url} store lives and dies with its process"
        raise Failure(msg, EXIT_USAGE, hint="use a folder or a sqlite:/// store")
    return backend


def folder_failure(exc: StoreFolderError) -> Failure:
    """The failure for a store that would be created in a folder that does not exist."""
    msg = f"cannot create the store {exc.path}: the folder {exc.folder} does not exist"
    return Failure(msg, hint="create the folder first, or fix the path: sqlite:///name.db "
                             "and jsonl:///name are relative to the working folder, "
                             "sqlite:////abs/name.db (four slashes) absolute")


def not_found(session_id: str, url: str) -> Failure:
    """The failure for a SOURCE that is neither a file nor a session in the store: a
    directory is named as one (it may be a store), anything else as neither."""
    if os.path.isdir(session_id):
        msg = (f'{session_id} is a directory, not a log file, and no session "{session_id}" '
               f"is in {url}")
        return Failure(msg, hint=f"a directory of logs is a store: `dsh-session ls --store "
                                 f"{session_id}` lists its sessions, and `--store "
                                 f"{session_id} ID` reads one")
    msg = f'no session "{session_id}" in {url} (and no such file)'
    return Failure(msg, hint=f"`dsh-session ls --store {url}` lists the sessions")


def check_session_id(backend: Backend, session_id: str) -> None:
    """Refuse, as one line naming the rule, an id the store's backend cannot hold (the
    empty id, a lone surrogate, an id too long for PostgreSQL...)."""
    from ..errors import SessionIdError

    try:
        backend.check_id(session_id)
    except SessionIdError as exc:
        shown = repr(session_id)
        if len(shown) > 60:
            shown = f"{shown[:40]}...{shown[-12:]} ({len(session_id)} characters)"
        msg = f"invalid session id {printable(shown)}: {exc.problem}"
        raise Failure(msg, EXIT_USAGE,
                      hint=f"the {exc.backend} backend's session ids are {exc.rule}") from None


def _read_stored(session_id: str, url: str, reg: EventRegistry) -> Source:
    from ..errors import LogFormatError

    backend = open_backend(url)
    try:
        check_session_id(backend, session_id)
        stored = backend.load_stored(session_id, reg)
    except LogFormatError as exc:
        where = f" ({exc.path})" if getattr(exc, "path", None) else ""
        msg = f'session "{session_id}" in {url}{where}: {one_line(exc)}'
        hint = "show the file itself to see what can be read" if where else None
        raise Failure(msg, hint=hint) from exc
    except OSError as exc:
        msg = f"cannot read the store {url}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    finally:
        backend.close()
    if stored is None:
        raise not_found(session_id, url)
    source = Source(stored.header, stored.events, f'session "{session_id}" in {url}')
    if stored.torn is not None:
        source.warnings.append(
            f"a torn tail after event seq {len(stored.events) - 1} is ignored "
            "(opening the session would cut it)"
        )
    _check_header(source)
    _check_closers(source)
    return source


def is_log_file(source: str) -> bool:
    """Whether SOURCE names a log file: an existing path that is not a directory (a
    folder named like a session id, such as the current directory's ``demo``, does
    not hide the session)."""
    return os.path.exists(source) and not os.path.isdir(source)


def _stored_here(session_id: str, url: str) -> bool:
    """Whether the store at ``url`` holds ``session_id`` (a store that does not exist, or
    cannot hold such an id, holds none): one cheap lookup, no session loaded."""
    from ..errors import DshSessionError

    try:
        backend = open_backend(url)
    except Failure:
        return False
    try:
        backend.check_id(session_id)
        return backend.tail_lines(session_id, 0) is not None
    except (DshSessionError, OSError):
        return False
    finally:
        backend.close()


def resolve(source: str, args: argparse.Namespace) -> str:
    """How SOURCE is read: ``"file"`` or ``"id"`` (the module's rule).

    :raises Failure: ``--file`` of a path that is no file; a path that is a file and
        also a session id in the store, with neither ``--file`` nor ``--id``.
    """
    if getattr(args, "as_file", False):
        if not is_log_file(source):
            what = "a directory" if os.path.isdir(source) else "not found"
            msg = f"no log file {source} ({what})"
            raise Failure(msg, hint="without --file, SOURCE may be a session id")
        return "file"
    if getattr(args, "as_id", False) or not is_log_file(source):
        return "id"
    url = store_url(args)
    if _stored_here(source, url):
        msg = f'"{source}" is both a log file here and a session in {url}'
        raise Failure(msg, EXIT_USAGE, hint=f"say which: --file {source} reads the file, "
                                            f"--id {source} the stored session")
    return "file"


def load_source(args: argparse.Namespace, reg: EventRegistry,
                source: str | None = None) -> Source:
    """The session ``source`` (default: ``args.source``) names, read by the module's
    rule."""
    path: str = args.source if source is None else source
    if resolve(path, args) == "file":
        return _read_file(path, reg, getattr(args, "recover", False))
    return _read_stored(path, store_url(args), reg)


#: The ``--store`` help of every command that reads a SOURCE.
STORE_HELP = ("the store holding a SOURCE that is a session id: a folder, jsonl:///path, "
              "jsonl+zstd:///path (compact), sqlite:///path.db or postgresql://host/dbname "
              "(default: $DSH_SESSION_STORE, else the user's data folder)")


def add_source_arguments(parser: argparse.ArgumentParser, *, many: bool = False,
                         recover: bool = True, optional: str | None = None) -> None:
    """SOURCE (one, or with ``many`` one or more), ``--store``, ``--file``/``--id``, and
    ``--recover``: the same arguments, with the same meaning, on every command that
    reads sessions.

    :param optional: SOURCE may be left out; this says what it does when given.
    """
    if many:
        parser.add_argument("sources", nargs="+", metavar="SOURCE",
                            help="log files (.jsonl) or ids of sessions in the store")
    elif optional is not None:
        parser.add_argument("source", nargs="?", metavar="SOURCE", help=optional)
    else:
        parser.add_argument("source", metavar="SOURCE",
                            help="a log file (.jsonl), or the id of a session in the store")
    parser.add_argument("--store", metavar="URL", help=STORE_HELP)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--file", dest="as_file", action="store_true",
                     help="read SOURCE as a file path, never a session id")
    how.add_argument("--id", dest="as_id", action="store_true",
                     help="read SOURCE as a session id, even when a file has its name")
    if recover:
        parser.add_argument(
            "--recover", action="store_true",
            help="read a file as a durable backend loads it: a torn tail is dropped, "
                 "a hole before the last turn/end is an error",
        )
