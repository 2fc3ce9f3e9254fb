"""Reading a JSONL log file from its end, and following it as it grows.

What ``tail`` and ``tail -f`` do, on a file given to the CLI and on a JSONL store's log
alike.

Beside :mod:`.logfile` (the format, and reading it from the end: ``complete_end``,
``last_lines``) and :mod:`.end` (where a log's history ends, read before its
size). A compact log (``jsonl+zstd:``) is followed by the same loop, with whole zstd
frames for units instead of lines (:data:`.frames.FRAMES`). The positions and the
news are the backend protocol's value types (:class:`LogTail`, :class:`LogNews`, which
:mod:`~dsh_session_core._persistence.base` re-exports), defined here, below the store,
since a log file is followed without one.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import time
from collections.abc import Iterator
from typing import BinaryIO, Final, Protocol

from .end import durable_end, history_end, within
from .logfile import complete_end, last_lines

__all__ = [
    "LINES",
    "POLL_SECONDS",
    "FilePosition",
    "Framing",
    "LogNews",
    "LogTail",
    "follow_file",
    "tail_file",
]

#: How often a polling follower (:meth:`~.base.Backend.follow_lines` of JSONL, SQLite and the
#: default) looks for new events: well under the second a person will wait, and a look
#: costs a ``stat`` call or one indexed query.
POLL_SECONDS: Final = 0.1


@dataclasses.dataclass(frozen=True, slots=True)
class LogTail:
    """The last events of a session (:meth:`~.base.Backend.tail_lines`).

    :ivar lines: their log lines as stored (without newline), oldest first.
    :ivar position: where following starts, just after them: an opaque marker of the
        backend's (a byte offset for JSONL, a seq for the databases), to be handed back
        to :meth:`~.base.Backend.follow_lines` of the same backend.
    """

    lines: builtins.list[bytes]
    position: object


@dataclasses.dataclass(frozen=True, slots=True)
class LogNews:
    """What a follower saw (:meth:`~.base.Backend.follow_lines`).

    :ivar lines: the new log lines (without newline), oldest first; may be empty.
    :ivar position: where following stands now (see :class:`LogTail`).
    :ivar note: for people, when the log was cut back (a repair) or rewritten under the
        follower: what happened and where following goes on; else ``None``.
    """

    lines: builtins.list[bytes]
    position: object
    note: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class FilePosition:
    """Where a follower of a log file stands (a :class:`LogTail` position).

    :ivar path: the log file.
    :ivar offset: just past the last complete line reported; 0 when none was (the first
        line to arrive is then the header, never reported).
    """

    path: str
    offset: int


def tail_file(path: str, count: int, known_end: int | None = None) -> LogTail:
    """The last ``count`` complete event lines of a log file, read from its end; a torn
    last line is left for the follower. A log's history ends at its durable-end mark,
    when it has one (:mod:`.end`, read first), or at ``known_end``
    (:func:`~.end.history_end`).

    :raises OSError: the file cannot be read.
    :raises LogFormatError: its mark holds no byte count.
    """
    end = history_end(path, known_end)
    with open(path, "rb") as f:
        offset = complete_end(f, within(os.fstat(f.fileno()).st_size, end))
        lines = last_lines(f, offset, count)
    return LogTail(lines, FilePosition(path, offset))


class Framing(Protocol):
    """How a follower finds complete lines in a log file's bytes: :data:`LINES` for a
    plain log, whole zstd frames for a compact one (:mod:`.frames`)."""

    def end_before(self, f: BinaryIO, limit: int) -> int:
        """Where the last complete unit (a line, a frame of lines) in the first ``limit``
        bytes of the file ends; 0 when none does."""
        ...

    def moved(self, fd: int, offset: int) -> bool:
        """Whether ``offset`` (a unit's end the follower read up to, not 0) is no longer
        one: the file was cut and regrew between two polls."""
        ...

    def complete(self, chunk: bytes) -> tuple[int, bytes]:
        """Of the bytes after a unit's end: how many make complete units, and their lines
        (each ``\n``-ended)."""
        ...


class _Lines:
    """A plain log's units are its lines."""

    def end_before(self, f: BinaryIO, limit: int) -> int:
        return complete_end(f, limit)

    def moved(self, fd: int, offset: int) -> bool:
        return os.pread(fd, 1, offset - 1) != b"\n"

    def complete(self, chunk: bytes) -> tuple[int, bytes]:
        end = chunk.rfind(b"\n") + 1  # complete lines only: a torn line waits
        return end, chunk[:end]


#: The framing of a plain log (:func:`follow_file`'s default).
LINES: Final[Framing] = _Lines()


def follow_file(
    position: object, *, timeout: float | None = None, poll: float = POLL_SECONDS,
    framing: Framing = LINES,
) -> Iterator[LogNews]:
    """Follow a log file from ``position``: yield its new *complete* lines as they arrive
    (a torn last line is reported once its newline arrives; in a compact log, a frame
    once it is whole: ``framing``).

    Polls, since a follower legitimately waits for data: every ``poll`` seconds it
    compares the file's size with what it has read, a ``stat`` costing microseconds.
    The file's size is read after its durable-end mark (:mod:`.end`), and what lies
    after the mark is not the log's: a failed batch that could not be rolled back is
    never reported once it is marked (and, reported before, is news of a cut).

    When the file shrinks (``repair`` cut a torn tail), a news item with no line says so
    and following goes on from the new end; when it was cut and regrew between two polls
    (the byte before the position is no longer a newline), from the start of the line
    now there. With ``timeout``, stops after that many seconds without news.

    :param position: a :class:`FilePosition` (of :func:`tail_file`, or of the last news).
    :raises OSError: the file cannot be opened.
    """
    if not isinstance(position, FilePosition):
        msg = f"a log file's position is a FilePosition, got {position!r}"
        raise TypeError(msg)
    path, offset = position.path, position.offset
    # Without a complete line yet, the first line to arrive is the header.
    header_pending = offset == 0
    with open(path, "rb") as f:
        fd = f.fileno()
        quiet_since = time.monotonic()
        while True:
            end = durable_end(path)  # the mark first, then the size
            size = within(os.fstat(fd).st_size, end)
            if size < offset:
                offset = framing.end_before(f, size)
                header_pending = offset == 0
                quiet_since = time.monotonic()
                yield LogNews([], FilePosition(path, offset),
                              f"the log was cut back to {size} bytes (a repair?); following "
                              f"from there")
                continue
            note = None
            if size > offset and offset and framing.moved(fd, offset):
                # Cut and regrown between two polls: what we read up to is no longer a
                # line end. Go back to the start of the line that is there now.
                offset = framing.end_before(f, offset - 1)
                header_pending = offset == 0
                note = ("the log was rewritten under the follower; following from the "
                        "last complete line")
            f.seek(offset)
            chunk = f.read(size - offset) if size > offset else b""
            end, text = framing.complete(chunk)
            if end or note is not None:
                lines = text[:-1].split(b"\n") if text else []
                offset += end
                if header_pending and lines:
                    lines, header_pending = lines[1:], False
                quiet_since = time.monotonic()
                yield LogNews(lines, FilePosition(path, offset), note)
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            time.sleep(poll)
