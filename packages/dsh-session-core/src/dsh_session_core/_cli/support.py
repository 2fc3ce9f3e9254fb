"""What every ``dsh-session`` command shares.

Failures, exit codes, warnings, loading logs, and how an error is shown:
:func:`failure_for` is the one table, which ``main`` applies to whatever a command lets
out (the read model's errors, a session not stored, any other error), and which a
command that reports an error among others (``rm``, ``retain``, one row per id) applies
through the same functions."""

from __future__ import annotations

import sys

from .._inspect.files import HEADER_HINT, ZSTD_MAGIC
from .._inspect.text import one_line

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False


if TYPE_CHECKING:
    from .._logformat.logfile import ParsedLog
    from .._model.session import Session
    from .._plugins.manager import PluginManager
    from .._schema.registry import EventRegistry
    from ..errors import InspectError, SessionNotStoredError

__all__ = [
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_REJECTED",
    "EXIT_USAGE",
    "HEADER_HINT",
    "ZSTD_MAGIC",
    "Failure",
    "failure_for",
    "failure_of",
    "load_session",
    "log_problem",
    "not_stored_failure",
    "one_line",
    "plugin_manager",
    "read_file",
    "read_log",
    "registry",
    "unreadable_log",
    "warn",
    "write",
]

#: Success.
EXIT_OK = 0
#: The input was read and rejected (a bad log, a failed check, a stale catalog).
EXIT_REJECTED = 1
#: The command line was wrong.
EXIT_USAGE = 2
#: Some sessions could not be read (a damaged record, a key not in the keyring, an
#: encrypted session read without keys): the others were answered, and each one left
#: out is named on stderr.
EXIT_PARTIAL = 3


class Failure(Exception):
    """A user-facing failure: one line, an optional hint (what to do), and the exit
    status to leave with."""

    def __init__(
        self, message: str, status: int = EXIT_REJECTED, *, hint: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.hint = hint


def failure_of(exc: InspectError) -> Failure:
    """The read model's refusal as a CLI failure: asked wrongly (a bad id, filter or
    URL) is a usage error, anything else (no such session, a log that does not read)
    a rejection; the message and the hint are the read model's. Raise it ``from
    exc.__cause__ or exc``: the failure's cause is then what the read model met (a
    ``StoreNotFoundError``, an ``OSError``), which a command may look at (``tail -F``
    waits for a store that is not there yet)."""
    from ..errors import InspectUsageError

    status = EXIT_USAGE if isinstance(exc, InspectUsageError) else EXIT_REJECTED
    return Failure(exc.message, status, hint=exc.hint)


def not_stored_failure(exc: SessionNotStoredError, url: str | None = None) -> Failure:
    """The store's "nothing is stored under this id" as a CLI failure: the read model's
    answer (:func:`~.._inspect.sources.not_stored`) naming the store as ``url`` (the
    command's ``--store``; default: the store's own location), a rejection."""
    from .._inspect.sources import not_stored

    return failure_of(not_stored(exc, url))


#: What is said of an error of dsh-session no row below names, and of any other.
_DEBUG_HINT = "run again with --debug to see where it came from"
_BUG_HINT = "run again with --debug for the traceback, and report it"
#: The database servers' drivers whose errors are a server's answer, not a bug.
_DRIVERS = ("psycopg", "redis")
#: What to check when a store's server cannot be reached or refuses.
SERVER_HINT = ("check that the server runs, and the URL's host, port, user, password "
               "and database")


def failure_for(exc: Exception) -> Failure:
    """How an error a command let out is shown: one line, a hint and the exit status.
    This is the one table (``main`` applies it; a row of its own for an error kind is
    added here, never in a command):

    - a :class:`Failure`: as the command made it;
    - the read model's :class:`~.errors.InspectError` (a bad id, filter or URL; no such
      session; a log or a store that does not read): :func:`failure_of`;
    - :class:`~.errors.SessionNotStoredError`: :func:`not_stored_failure`;
    - any other error of dsh-session (e.g. two plugins clash): its one line, a
      rejection, and how to see where it came from;
    - a database server's driver's error (psycopg, redis-py: the server went away, or
      refused): its one line, said to be the store's server's, and what to check;
    - anything else is a bug (ours or a plugin's): still one line, never a traceback.
    """
    from ..errors import DshSessionError, InspectError, SessionNotStoredError

    if isinstance(exc, Failure):
        return exc
    if isinstance(exc, InspectError):
        return failure_of(exc)
    if isinstance(exc, SessionNotStoredError):
        return not_stored_failure(exc)
    if isinstance(exc, DshSessionError):
        return Failure(one_line(exc), EXIT_REJECTED, hint=_DEBUG_HINT)
    if type(exc).__module__.startswith(_DRIVERS):
        return Failure(f"the store's server: {one_line(exc)}", EXIT_REJECTED,
                       hint=SERVER_HINT)
    return Failure(f"internal error: {one_line(exc)}", EXIT_REJECTED, hint=_BUG_HINT)


def warn(message: str) -> None:
    """One warning line on stderr."""
    from .term import Style, printable

    style = Style.for_stream(sys.stderr)
    sys.stderr.write(f"dsh-session: {style('warning:', 'yellow')} {printable(message)}\n")
    sys.stderr.flush()


def plugin_manager() -> PluginManager:
    """The installed plugins, loaded once per process (the read model's)."""
    from .._inspect.stores import installed_plugins

    return installed_plugins()


def registry() -> EventRegistry:
    """The frozen registry of the installed plugins' event types."""
    from .._plugins.manager import PluginHooks

    return PluginHooks(plugin_manager()).build_registry()


def read_file(path: str, label: str = "reading") -> bytes:
    """A whole log file, as the read model reads it
    (:func:`~.._inspect.files.read_log_file`: up to its durable-end mark, a compact log
    decoded); on a terminal, a big one shows a progress bar as it is read, and what is
    odd about the bytes is a warning on stderr."""
    from .._inspect.files import read_log_file
    from ..errors import InspectError
    from .term import Progress

    try:
        data, warnings = read_log_file(path, label=label, progress=Progress)
    except InspectError as exc:
        raise failure_of(exc) from exc.__cause__ or exc
    for warning in warnings:
        warn(warning)
    return data


def read_log(path: str, reg: EventRegistry) -> ParsedLog:
    """A log file, parsed as is (a rejection is a :class:`~.errors.DshSessionError`)."""
    from .._logformat.logfile import parse_log

    return parse_log(read_file(path), reg, path=path)


def load_session(path: str, reg: EventRegistry) -> Session:
    """A bare session seeded with a log file."""
    from .._logformat.logfile import open_session

    return open_session(read_log(path, reg), reg)


def write(data: bytes | str) -> None:
    """Write to stdout (bytes as they are)."""
    if isinstance(data, str):
        data = data.encode()
    sys.stdout.buffer.write(data)


def unreadable_log(path: str, exc: Exception, otherwise: str | None, *,
                   header_hint: bool = True) -> Failure:
    """The failure for the log file ``path`` that did not read (the read model's
    :func:`~.._inspect.files.unreadable_log`)."""
    from .._inspect import files

    return failure_of(files.unreadable_log(path, exc, otherwise, header_hint=header_hint))


def log_problem(path: str, exc: Exception) -> str:
    """What is wrong with the log file ``path`` that did not read, as one line (for
    ``validate``, and rows of ``--jsonl`` output)."""
    from .._inspect.files import not_a_log

    reason = not_a_log(path, exc)
    return f"not a dsh-session log: {reason}" if reason is not None else one_line(exc)
