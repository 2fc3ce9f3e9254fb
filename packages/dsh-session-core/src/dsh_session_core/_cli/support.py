"""What every ``dsh-session`` command shares: failures, exit codes, loading logs."""

from __future__ import annotations

import sys

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False


if TYPE_CHECKING:
    from .._logfile import ParsedLog
    from .._plugins import PluginManager
    from .._registry import EventRegistry
    from .._session import Session

__all__ = [
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_USAGE",
    "HEADER_HINT",
    "Failure",
    "load_session",
    "log_hint",
    "log_problem",
    "not_a_log",
    "one_line",
    "plugin_manager",
    "read_file",
    "read_log",
    "registry",
    "unreadable_log",
    "write",
]

#: Success.
EXIT_OK = 0
#: The input was read and rejected (a bad log, a failed check, a stale catalog).
EXIT_REJECTED = 1
#: The command line was wrong.
EXIT_USAGE = 2


class Failure(Exception):
    """A user-facing failure: one line, an optional hint (what to do), and the exit
    status to leave with."""

    def __init__(
        self, message: str, status: int = EXIT_REJECTED, *, hint: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.hint = hint


_pm: PluginManager | None = None


def plugin_manager() -> PluginManager:
    """The installed plugins, loaded once per process."""
    global _pm  # one manager per CLI run
    if _pm is None:
        from .._plugins import create_plugin_manager

        _pm = create_plugin_manager()
    return _pm


def registry() -> EventRegistry:
    """The frozen registry of the installed plugins' event types."""
    from .._plugins import PluginHooks

    return PluginHooks(plugin_manager()).build_registry()


def read_file(path: str, label: str = "reading") -> bytes:
    """A whole file; on a terminal, a big one shows a progress bar as it is read. A
    compact log (``<id>.jsonl.zst`` of a ``jsonl+zstd:`` store) is read as the log it
    holds (:func:`compact_log`). A log whose write failed and could not be rolled back
    is read up to its durable-end mark (``<file>.durable``, read first): the failed
    batch is not the log's.
    """
    import os

    from .._logend import durable_end, within
    from ..errors import LogFormatError
    from .term import Progress

    try:
        end = durable_end(path)
    except LogFormatError as exc:
        raise Failure(str(exc)) from exc
    try:
        with open(path, "rb") as f:
            size = within(os.fstat(f.fileno()).st_size, end)
            chunks: list[bytes] = []
            with Progress(size, f"{label} {os.path.basename(path)}") as bar:
                while chunk := f.read(_CHUNK):
                    chunks.append(chunk)
                    bar.advance(len(chunk))
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise Failure(msg, hint="check the path (a session id needs --store)") from exc
    data = b"".join(chunks)
    if end is not None:
        data = data[:end]
    return compact_log(path, data) if data.startswith(ZSTD_MAGIC) else data


#: How a zstd frame starts: a file starting so is a compact log, never a JSONL one.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def compact_log(path: str, data: bytes) -> bytes:
    """A compact log file's log: its whole zstd frames, decoded. A frame cut short at
    the end (a torn write) is left out, with a warning, as a torn line is skipped.

    :raises Failure: ``zstandard`` is not installed.
    """
    from .._logframes import decode_frames
    from ..errors import MissingExtraError

    try:
        frames = decode_frames(data)
    except MissingExtraError as exc:
        msg = f"{path}: {exc}"
        raise Failure(msg, hint="or decode it first: zstd -dc FILE") from exc
    if frames.complete < len(data):
        from .source import warn

        warn(f"{path}: the zstd frames from byte {frames.complete} on do not decode (a torn "
             f"write?): skipped")
    return frames.plain


_CHUNK = 1 << 20  # progress granularity of big reads


def one_line(exc: BaseException) -> str:
    """An error as one line: its class, its message, and the event seq it is about."""
    text = " ".join(str(exc).split())
    seq = getattr(exc, "seq", None)
    if isinstance(seq, int) and seq >= 0:
        text += f" (at event seq {seq})"
    return f"{type(exc).__name__}: {text}"


def read_log(path: str, reg: EventRegistry) -> ParsedLog:
    """A log file, parsed as is (a rejection is a :class:`~.errors.DshSessionError`)."""
    from .._logfile import parse_log

    return parse_log(read_file(path), reg, path=path)


def load_session(path: str, reg: EventRegistry) -> Session:
    """A bare session seeded with a log file."""
    from .._logfile import open_session

    return open_session(read_log(path, reg), reg)


def write(data: bytes | str) -> None:
    """Write to stdout (bytes as they are)."""
    if isinstance(data, str):
        data = data.encode()
    sys.stdout.buffer.write(data)


#: What to try when the header itself is bad: no crash tears line 1 of a log that
#: loaded once (the first write is atomic), so neither --recover nor repair can help.
HEADER_HINT = "the header (line 1) is not a crash tail: restore the file from a copy"


def log_hint(exc: Exception, otherwise: str | None) -> str | None:
    """The hint for a log that failed to read: ``otherwise``, unless the header is bad."""
    if getattr(exc, "line", None) == 1:
        return HEADER_HINT
    return otherwise


#: What to try when a file is no log at all: restoring it from a copy would not help.
NOT_A_LOG_HINT = ('a dsh-session log starts with its session header, {"type":"session",...}; '
                  "a stored session is named by its id (with --store URL)")
#: How much of a file is read again to see its first line.
_FIRST_LINE_MAX = 1 << 20


def not_a_log(path: str, exc: Exception) -> str | None:
    """Why the file at ``path``, whose reading failed with ``exc``, is not a dsh-session
    log at all (``its first line is not JSON``), or None: the failure is not about its
    first line, or that line may be a damaged header (which a copy would restore)."""
    from .._logfile import not_a_header_at_all
    from ..errors import LogFormatError

    if not isinstance(exc, LogFormatError) or exc.line != 1:
        return None
    try:
        with open(path, "rb") as f:  # the first line only: the file may be big
            head = f.read(_FIRST_LINE_MAX)
    except OSError:
        return None
    if head.startswith(ZSTD_MAGIC):
        return None  # a compact log: its header is inside the frames
    return not_a_header_at_all(head.split(b"\n", 1)[0])


def unreadable_log(path: str, exc: Exception, otherwise: str | None, *,
                   header_hint: bool = True) -> Failure:
    """The failure for the log file ``path`` that did not read: ``PATH is not a
    dsh-session log: ...`` when it is no log at all, else ``PATH: <the error>`` with the
    hint for it: ``otherwise``, or with ``header_hint`` :data:`HEADER_HINT` for a damaged
    header."""
    reason = not_a_log(path, exc)
    if reason is not None:
        return Failure(f"{path} is not a dsh-session log: {reason}", hint=NOT_A_LOG_HINT)
    hint = log_hint(exc, otherwise) if header_hint else otherwise
    return Failure(f"{path}: {one_line(exc)}", hint=hint)


def log_problem(path: str, exc: Exception) -> str:
    """What is wrong with the log file ``path`` that did not read, as one line (for
    ``validate``, and rows of ``--jsonl`` output)."""
    reason = not_a_log(path, exc)
    return f"not a dsh-session log: {reason}" if reason is not None else one_line(exc)
