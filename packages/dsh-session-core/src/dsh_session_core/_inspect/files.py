"""Reading one log file's bytes for display, and saying why a file is no log.

A log file is read whole, up to its durable-end mark (``<file>.durable``: a write that
failed and could not be rolled back is not the log's), and a compact log
(``<id>.jsonl.zst`` of a ``jsonl+zstd:`` store) is read as the log it holds. Nothing is
written, no lock is taken. A failure is a :class:`~..errors.SourceReadError`; what is
odd but readable (a torn zstd frame at the end) is a warning, handed to the caller.
"""

from __future__ import annotations

# typing and the errors cost ~20 ms to import: the CLI, which imports this module's
# constants at start, must not pay for them.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from typing import Protocol

    from ..errors import SourceReadError

    class Advance(Protocol):
        """A progress bar's one method: ``n`` more bytes read."""

        def advance(self, n: int) -> None: ...

    #: How a caller shows a long read: called with the size and a label, it gives a
    #: context manager whose value is told each chunk read (the CLI's bar on a terminal).
    Progress = Callable[[int, str], AbstractContextManager[Advance]]

__all__ = [
    "HEADER_HINT",
    "NOT_A_LOG_HINT",
    "ZSTD_MAGIC",
    "compact_log",
    "log_hint",
    "not_a_log",
    "read_log_file",
    "unreadable_log",
]

#: How a zstd frame starts: a file starting so is a compact log, never a JSONL one.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: What to try when the header itself is bad: no crash tears line 1 of a log that
#: loaded once (the first write is atomic), so neither --recover nor repair can help.
HEADER_HINT = "the header (line 1) is not a crash tail: restore the file from a copy"

#: What to try when a file is no log at all: restoring it from a copy would not help.
NOT_A_LOG_HINT = ('a dsh-session log starts with its session header, {"type":"session",...}; '
                  "a stored session is named by its id (with --store URL)")

_CHUNK = 1 << 20  # progress granularity of big reads
#: How much of a file is read again to see its first line.
_FIRST_LINE_MAX = 1 << 20


def read_log_file(path: str, *, label: str = "reading", progress: Progress | None = None
                  ) -> tuple[bytes, list[str]]:
    """A whole log file's bytes (up to its durable-end mark; a compact log decoded), and
    the warnings about them.

    :param progress: how to show the read (default: not at all).
    :raises SourceReadError: the file cannot be read, its durable-end mark is bad, or it
        is a compact log and ``zstandard`` is not installed.
    """
    import os

    from .._logformat.end import durable_end, within
    from ..errors import LogFormatError, SourceReadError

    try:
        end = durable_end(path)
    except LogFormatError as exc:
        raise SourceReadError(str(exc), path=path) from exc
    try:
        with open(path, "rb") as f:
            size = within(os.fstat(f.fileno()).st_size, end)
            chunks: list[bytes] = []
            if progress is None:
                while chunk := f.read(_CHUNK):
                    chunks.append(chunk)
            else:
                with progress(size, f"{label} {os.path.basename(path)}") as bar:
                    while chunk := f.read(_CHUNK):
                        chunks.append(chunk)
                        bar.advance(len(chunk))
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise SourceReadError(msg, hint="check the path (a session id needs --store)",
                              path=path) from exc
    data = b"".join(chunks)
    if end is not None:
        data = data[:end]
    warnings: list[str] = []
    if data.startswith(ZSTD_MAGIC):
        data = compact_log(path, data, warnings)
    return data, warnings


def compact_log(path: str, data: bytes, warnings: list[str]) -> bytes:
    """A compact log file's log: its whole zstd frames, decoded. A frame cut short at
    the end (a torn write) is left out, with a warning (added to ``warnings``), as a torn
    line is skipped.

    :raises SourceReadError: ``zstandard`` is not installed.
    """
    from .._logformat.frames import decode_frames
    from ..errors import MissingExtraError, SourceReadError

    try:
        frames = decode_frames(data)
    except MissingExtraError as exc:
        msg = f"{path}: {exc}"
        raise SourceReadError(msg, hint="or decode it first: zstd -dc FILE",
                              path=path) from exc
    if frames.complete < len(data):
        warnings.append(f"{path}: the zstd frames from byte {frames.complete} on do not "
                        f"decode (a torn write?): skipped")
    return frames.plain


def log_hint(exc: Exception, otherwise: str | None) -> str | None:
    """The hint for a log that failed to read: ``otherwise``, unless the header is bad."""
    if getattr(exc, "line", None) == 1:
        return HEADER_HINT
    return otherwise


def not_a_log(path: str, exc: Exception) -> str | None:
    """Why the file at ``path``, whose reading failed with ``exc``, is not a dsh-session
    log at all (``its first line is not JSON``), or None: the failure is not about its
    first line, or that line may be a damaged header (which a copy would restore)."""
    from .._logformat.logfile import not_a_header_at_all
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
                   header_hint: bool = True) -> SourceReadError:
    """The error for the log file ``path`` that did not read: ``PATH is not a
    dsh-session log: ...`` when it is no log at all, else ``PATH: <the error>`` with the
    hint for it: ``otherwise``, or with ``header_hint`` :data:`HEADER_HINT` for a damaged
    header."""
    from ..errors import SourceReadError
    from .text import one_line

    reason = not_a_log(path, exc)
    if reason is not None:
        return SourceReadError(f"{path} is not a dsh-session log: {reason}",
                               hint=NOT_A_LOG_HINT, path=path)
    hint = log_hint(exc, otherwise) if header_hint else otherwise
    return SourceReadError(f"{path}: {one_line(exc)}", hint=hint, path=path)
