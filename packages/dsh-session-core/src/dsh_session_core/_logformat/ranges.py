"""Reading a range of a JSONL log without reading the log: the events after a seq.

They are found by a binary search over the file's bytes.

A durable log's events are contiguous from seq 0, one a line, each written ``type``
first and ``seq`` second (``{"type":"...","seq":N,...``), so the line of seq ``k`` can be
found by probing a few points of the file: at each, the next line's start and the seq
it begins with. That costs O(log(size)) reads of a block, then the lines returned; a
1M-event log answers in a few milliseconds. A log this does not recognise (a line
written by hand in another key order, a seq out of place) makes :func:`lines_after`
answer ``None``, and the caller reads the log whole: never a wrong answer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from typing import BinaryIO, Final

import msgspec

from .end import history_end, within
from .logfile import complete_end

__all__ = ["lines_after", "lines_in", "lines_of_types", "lines_of_types_in"]

#: How much of a line's start a probe reads: enough for ``{"type":"<type>","seq":N``.
_HEAD: Final = 256
#: Blocks read forwards to find a newline, and to collect the lines returned.
_BLOCK: Final = 65536
#: The first read looking for a line's end (most lines are far shorter than a block).
_PEEK: Final = 4096
#: The span the bisection narrows to before the lines in it are walked (in memory).
_WALK: Final = 8192
_SEQ = re.compile(rb'\{"type":"[^"\\]{0,200}","seq":(\d{1,19})[,}]')


def _line_start(f: BinaryIO, pos: int, end: int) -> int:
    """The first line start at or after ``pos`` (``pos`` itself when the byte before it
    is a newline), or ``end`` when no line starts in ``[pos, end)``."""
    f.seek(pos - 1)
    at = pos - 1
    size = _PEEK
    while at < end:
        block = f.read(min(size, end - at))
        size = _BLOCK
        if not block:
            return end
        nl = block.find(b"\n")
        if nl >= 0:
            return min(at + nl + 1, end)
        at += len(block)
    return end


def _seq_at(f: BinaryIO, start: int) -> int | None:
    f.seek(start)
    found = _SEQ.match(f.read(_HEAD))
    return None if found is None else int(found[1])


def lines_after(path: str, after: int, limit: int | None, known_end: int | None = None
                ) -> list[bytes] | None:
    """The complete event lines (without their newline) of the log at ``path`` whose
    seq is greater than ``after``, at most ``limit`` of them (``None``: all), oldest
    first; a torn last line is never returned. ``None`` when the log cannot be read this
    way (the caller then reads it whole). Nothing after the log's durable-end mark
    (:mod:`.end`) is read, nor after ``known_end`` (:func:`~.end.history_end`).

    :raises FileNotFoundError: there is no file at ``path``.
    """
    end = history_end(path, known_end)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb", buffering=0) as f:
        return lines_in(f, within(os.fstat(fd).st_size, end), after, limit)


def lines_in(f: BinaryIO, size: int, after: int, limit: int | None) -> list[bytes] | None:
    """:func:`lines_after` of an open log of ``size`` bytes (a compact log's decoded
    bytes, in memory)."""
    end = complete_end(f, size)
    header_end = _line_start(f, 1, end) if end > 0 else 0
    if header_end >= end or (limit is not None and limit <= 0):
        return []
    target = max(after + 1, 0)
    start = _find(f, target, header_end, end)
    if start is None:
        return None
    if start >= end:
        return []
    return _collect(f, start, end, target, limit)


def _find(f: BinaryIO, target: int, lo: int, end: int) -> int | None:
    """The start of the line of seq ``target`` (``end`` when the log stops before it),
    by bisection over ``[lo, end)``; ``None`` when a probe meets a line it cannot read."""
    hi = end
    # Invariant: the target line, if any, starts in [lo, hi); lo is a line start.
    while True:
        seq = _seq_at(f, lo)
        if seq is None:
            return None
        if seq >= target:
            return lo if seq == target else None  # past it at the start: not contiguous
        if hi - lo <= _WALK:
            break
        half = (lo + hi) // 2
        mid = _line_start(f, half, hi)
        if mid >= hi:
            hi = half  # no line starts in [half, hi): the target starts before
            continue
        probe = _seq_at(f, mid)
        if probe is None:
            return None
        if probe <= target:
            lo = mid
            if probe == target:
                return lo
        else:
            hi = mid
    # A block or less is left: walk its lines, in memory where they fit one read.
    found, at = _walk_read(f, target, lo, hi, end)
    if found is not _GO_ON:
        return found  # type: ignore[return-value]  # an int or None: the sentinel is out
    while at < hi:
        nxt = _line_start(f, at + 1, end)
        if nxt >= end:
            return end
        seq = _seq_at(f, nxt)
        if seq is None:
            return None
        if seq >= target:
            return nxt if seq == target else None
        at = nxt
    # Walked past hi without meeting the target: only a log that is not contiguous.
    return end if hi >= end else None


#: :func:`_walk_read` did not settle it: walk on by reads.
_GO_ON: Final = object()


def _walk_read(f: BinaryIO, target: int, lo: int, hi: int, end: int
               ) -> tuple[object, int]:
    """:func:`_find`'s last walk over ``[lo, hi)`` from one read of the block (and the
    head of the line after it): ``(the answer, _)``, or ``(_GO_ON, where to walk on
    from)`` when a line runs past what was read."""
    f.seek(lo)
    chunk = f.read(min(end, hi + _BLOCK + _HEAD) - lo)
    at = 0
    while lo + at < hi:
        nl = chunk.find(b"\n", at)
        if nl < 0:
            return _GO_ON, lo + at
        nxt = nl + 1
        if lo + nxt >= end:
            return end, 0
        found = _SEQ.match(chunk, nxt, nxt + _HEAD)
        if found is None:
            if nxt + _HEAD > len(chunk) and lo + len(chunk) < end:
                return _GO_ON, lo + at  # its head was cut off by the read
            return None, 0
        seq = int(found[1])
        if seq >= target:
            return (lo + nxt if seq == target else None), 0
        at = nxt
    # Walked past hi without meeting the target: only a log that is not contiguous.
    return (end if hi >= end else None), 0


def _collect(f: BinaryIO, start: int, end: int, first: int, limit: int | None
             ) -> list[bytes] | None:
    """``limit`` lines from ``start`` (the line of seq ``first``), each checked to hold
    the seq that follows."""
    f.seek(start)
    buf = b""
    at = start
    while at < end and (limit is None or buf.count(b"\n") < limit):
        block = f.read(min(_BLOCK, end - at) if limit is not None else end - at)
        if not block:
            break
        buf += block
        at += len(block)
    lines = buf.split(b"\n")[:-1]  # the piece after the last newline is cut, or empty
    if limit is not None:
        lines = lines[:limit]
    for offset in (0, len(lines) - 1):
        if lines:
            found = _SEQ.match(lines[offset][:_HEAD])
            if found is None or int(found[1]) != first + offset:
                return None
    return lines



def lines_of_types(path: str, types: Collection[str], known_end: int | None = None
                   ) -> list[bytes] | None:
    """The complete event lines (without their newline) of the log at ``path`` whose
    type is one of ``types``, oldest first; a torn last line is never returned. ``None``
    when the log may hold a line of those types that this search does not see (written
    by hand, ``type`` not first, or spaced): the caller reads every line instead.

    One read of the file and one pass over its bytes at C speed: a search for every
    place a JSON string begins as the types all do (``"agents/``), each of which must be
    the type of a line, written first (``\n{"type":"agents/``); else an event of those
    types may be written some other way (or a string of the data merely starts so, and
    the caller's full read costs more, that is all). The other lines are never split
    out: the cost is the read and the lines returned, not the count of lines. Nothing
    after the log's durable-end mark (:mod:`.end`) is read, nor after ``known_end``
    (:func:`~.end.history_end`).

    :raises FileNotFoundError: there is no file at ``path``.
    """
    end = history_end(path, known_end)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb", buffering=0) as f:
        return lines_of_types_in(f.read() if end is None else f.read(end), types)


#: What every line of the log starts with, up to its type's value.
_TYPE_FIRST: Final = b'\n{"type":'


def lines_of_types_in(body: bytes, types: Collection[str]) -> list[bytes] | None:
    """:func:`lines_of_types` of a log's bytes (a compact log's, decoded)."""
    end = body.rfind(b"\n")  # the newline ending the last complete line
    first = body.find(b"\n")  # the newline ending the header, before the first event
    if first < 0 or end <= first or not types:
        return []
    # Each type's JSON string without its closing quote, and what they all begin with.
    quoted = [msgspec.json.encode(t)[:-1] for t in set(types)]
    low, high = min(quoted), max(quoted)  # what all share, the first and last share
    size = next((i for i, (a, b) in enumerate(zip(low, high, strict=False)) if a != b),
                len(low))
    common = low[:size]
    lead = len(_TYPE_FIRST)
    # A wanted line from its newline on: the type whole, then the next key's comma.
    wanted = tuple(_TYPE_FIRST + q + b'",' for q in quoted)
    lines: list[bytes] = []
    append, find, starts = lines.append, body.find, body.startswith
    # Every place a string begins as the types do, each in one step: a wanted line's
    # type (kept), else the type of another line (skipped), else not a line's type at
    # all (the search cannot be sure: None).
    at = find(common, first + lead, end)
    while at >= 0:
        if starts(wanted, at - lead):
            append(body[at - lead + 1:find(b"\n", at, end + 1)])
        elif not starts(_TYPE_FIRST, at - lead):
            return None
        # On from just past this one: a kept line's data is searched too.
        at = find(common, at + size, end)
    return lines
