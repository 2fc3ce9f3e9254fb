"""A JSONL log's durable-end mark, as every reader of a log file reads it (issue 24, point 10).

It says where the log's history ends.

A flush appends a batch and fsyncs; when either fails, the log is cut back to the size
it had. When that cut fails too, the failed batch's bytes stay at the log's end, and
they may be whole, valid lines (or, in a compact log, whole zstd frames): no reader
could tell them from history. So the writer leaves, beside the log, a small file saying
how long the log's history is, before the flush raises: ``<log file name>.durable``
(``s.jsonl.durable``, ``s.jsonl.zst.durable``) holding that byte count in decimal and a
newline. The log itself stays in the reference's format, byte for byte; the reference
lists ``*.jsonl`` files only, and never sees the mark.

Every reader of a log reads the mark first, then the log, and stops at the mark: a
load, ``tail``, ``read``, the counts of ``ls``, a search, ``copy``, ``export``, a
follower, the CLI on a file. Read in that order, a writer that cuts the log, removes the
mark and appends again meanwhile leaves the reader a prefix of the history, never the
failed bytes.

This module is the reading side of the mark, beside :mod:`.logfile` (the format): what
the mark is called and what it says. Writing and removing it is the JSONL writer's
(:mod:`.endmark`).
"""

from __future__ import annotations

from typing import Final

from ..errors import LogFormatError

__all__ = ["SUFFIX", "durable_end", "history_end", "mark_of", "within"]

#: How a log's mark is named: the log's file name and this.
SUFFIX: Final = ".durable"

#: The longest mark read (a byte count of 19 digits and a newline, and room to see more).
_MAX: Final = 32


def mark_of(path: str) -> str:
    """The mark of the log at ``path``."""
    return path + SUFFIX


def durable_end(path: str) -> int | None:
    """The byte count the mark of the log at ``path`` holds: the log's history ends
    there; ``None`` when the log has no mark (all of its complete lines are history).

    :raises LogFormatError: the mark holds no byte count (edited by hand).
    """
    mark = mark_of(path)
    try:  # read as the log is (an unbuffered read of the whole, small file)
        f = open(mark, "rb", buffering=0)  # noqa: SIM115 - closed right below
    except (FileNotFoundError, NotADirectoryError):
        return None
    with f:
        text = f.read(_MAX)
    digits = text[:-1]
    if not (text.endswith(b"\n") and digits.isdigit() and len(digits) < 20):
        msg = (f"{mark} should hold the byte count where the log's history ends (a write "
               f"that failed left it), and holds {text!r}: cut {path} to its last line you "
               f"know was written, then remove {mark}")
        raise LogFormatError(msg, path=mark, line=1)
    return int(digits)


def history_end(path: str, known: int | None = None) -> int | None:
    """:func:`durable_end`, or ``known`` when it is earlier: where a writer knows the
    history ends without a mark (its failed write could mark it neither), its own
    reads stop there too, as its loads do."""
    end = durable_end(path)
    if known is None:
        return end
    return known if end is None else min(end, known)


def within(size: int, end: int | None) -> int:
    """How much of a log ``size`` bytes long is history, when :func:`durable_end` (read
    before the size) said ``end``."""
    return size if end is None else min(size, end)
