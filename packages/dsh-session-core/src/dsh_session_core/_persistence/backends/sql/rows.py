"""The row shape both database backends (SQLite, PostgreSQL) share with the reference.

An event is a row of ``events(session_id, seq, type, time, data, source_event_seqs,
surface_op)``, its JSON kept as the text the log holds; a header is a row of
``sessions(id, version, created_at, cwd, parent_session, seed_length)``. This module
turns events and headers into rows (checked before any transaction begins, so a value a
column cannot hold fails the batch before anything is written), and rows back into log
lines: fast, as lines the database builds a chunk at a time (:func:`load_chunks`), or
row by row by the reference's scan rules (:func:`scan_rows`) when that fails.

The columns rebuild a line in the reference's spelling and key order
(:mod:`.row_lines`). An appended line they would not give back byte for byte (a line
another writer spelt otherwise, an opaque event's keys in their own order) is kept
beside its row as it was appended (:func:`kept_lines`), and read back instead of the
rebuilt one: every log comes back with the bytes it was written with.
"""

from __future__ import annotations

import operator
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, NamedTuple, TypeAlias

from msgspec import UNSET

from ...._schema.codec import ENCODER, encode_events, encode_line
from ...._schema.decode import decode_body
from ...._schema.header import SessionHeader
from ...._schema.registry import EventRegistry
from ....errors import LogFormatError, UnstorableError
from ....events import Event, OpaqueEvent
from ....jscompat import json_parse
from ...base import SessionSummary, StoredLog
from .row_lines import CLOSER_DATA_END, Row, rebuilt_line, row_line

__all__ = [
    "CLOSER_DATA_END",
    "PARAMS_PER_ROW",
    "Row",
    "RowScan",
    "batch_rows",
    "event_params",
    "header_of",
    "header_row",
    "kept_lines",
    "load_chunks",
    "row_line",
    "scan_rows",
    "scanned",
    "unencodable",
    "utf8_ok",
]

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_WIRE_KEYS: Final = frozenset({"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"})

class RowScan(NamedTuple):
    """What :func:`scan_rows` keeps of a session's rows.

    :ivar lines: the log line of each preserved event (rows ``0..k-1``), no newline.
    :ivar torn: ``k``, the seq from which the rows are a torn tail to delete, when
        some rows are not preserved; else ``None``.
    """

    lines: list[bytes]
    torn: int | None


# --- reading --------------------------------------------------------------------------


def _parses(text: str) -> bool:
    """Whether ``text`` is one JSON value, as JavaScript's ``JSON.parse`` decides."""
    try:
        json_parse(text)
    except ValueError:  # JSONDecodeError, and the constants JS refuses
        return False
    return True


def scan_rows(rows: Iterable[Row]) -> RowScan:
    """The reference's ``scanRows``: the longest valid prefix of a session's rows.

    A row whose ``data`` (or a non-NULL ``source_event_seqs``/``surface_op``) is not
    JSON is a hole. Rows are kept from seq 0 while they parse and ``seq`` equals their
    index; where that stops, everything after is a torn tail, unless the stop comes at
    or before the last parsed ``turn/end`` row: committed corruption. A preserved row's
    line is the line kept for it when that parses, else the one its columns rebuild
    (the columns are what the reference reads).

    :param rows: ``(seq, type, time, data, source_event_seqs, surface_op[, line])`` in
        seq order.
    :raises LogFormatError: ``corrupt session log: unparsable committed event at seq
        <seq>`` or ``corrupt session log: seq gap in committed region (expected <i>,
        got <seq>)``.
    """
    rows = list(rows)
    ok = [
        _parses(row[3])
        and (row[4] is None or _parses(row[4]))
        and (row[5] is None or _parses(row[5]))
        for row in rows
    ]
    last_turn_end = -1
    for i, row in enumerate(rows):
        if ok[i] and row[1] == "turn/end":
            last_turn_end = i
    lines: list[bytes] = []
    for i, row in enumerate(rows):
        seq = row[0]
        if ok[i] and seq == i:
            kept = row[6] if len(row) > 6 else None
            lines.append(row_line(row) if kept is not None and _parses(kept)
                         else rebuilt_line(row))
            continue
        if i <= last_turn_end:
            if not ok[i]:
                msg = f"corrupt session log: unparsable committed event at seq {seq}"
            else:
                from ...._schema.seq_text import got_seq

                msg = (f"corrupt session log: seq gap in committed region (expected {i}, "
                       f"got {got_seq(seq)})")
            raise LogFormatError(msg)
        break
    return RowScan(lines, len(lines) if len(lines) < len(rows) else None)


def scanned(
    header: SessionHeader, rows: Iterable[Row], registry: EventRegistry, where: str
) -> StoredLog:
    """A session loaded the careful way: :func:`scan_rows`, then decoded.

    :param where: the database, named by a :class:`LogFormatError`.
    """
    try:
        scan = scan_rows(rows)
    except LogFormatError as exc:
        raise LogFormatError(str(exc), path=where) from None
    jsonl = b"\n".join([*scan.lines, b""]) if scan.lines else b""
    return StoredLog(header, decode_body(registry, jsonl), scan.torn, jsonl)


_seq_of = operator.attrgetter("seq")


def _in_order(events: list[Event], start: int, count: int) -> bool:
    """Whether ``events`` have exactly the seqs ``start .. start+count-1``, in order."""
    return len(events) == count and all(
        map(operator.eq, map(_seq_of, events), range(start, start + count))
    )


# --- writing --------------------------------------------------------------------------


def _int64(value: object) -> int | None:
    """``value`` as a 64-bit integer (an integral float counts: JS has one number
    type), or ``None`` when the column cannot hold it."""
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return None


def _json_text(value: object) -> str:
    return ENCODER.encode(value).decode()


def _unstorable(
    session_id: str, event_type: str, seq: object, what: str, backend: str
) -> UnstorableError:
    return UnstorableError(
        f'event "{event_type}" (seq {seq}) of session "{session_id}" {what}; the {backend} '
        f"backend cannot store it",
        session_id=session_id,
        seq=seq if type(seq) is int else None,
    )


_EventRow: TypeAlias = tuple[str, int, str, int, str, "str | None", "str | None"]


def _event_row(
    session_id: str, event: Event, data: str, backend: str, lines: bool = False
) -> _EventRow:
    """The ``events`` row of one event whose payload encodes to ``data``, checked
    before any transaction begins (the careful path of :func:`event_params`).

    :param lines: its log line is kept beside the row (:func:`kept_lines`)."""
    if type(event) is OpaqueEvent:
        # Kept verbatim from a log: beyond its line (when it is kept), only what the
        # columns hold survives a round trip.
        wire = event.wire
        event_type = wire.get("type")
        if not isinstance(event_type, str):
            raise _unstorable(
                session_id, repr(event_type), event.seq, "has no string type", backend
            )
        if not utf8_ok(event_type):
            raise _unstorable(
                session_id, repr(event_type), event.seq,
                "has a type holding a lone surrogate (a text column holds none)", backend,
            )
        extra = sorted(set(wire) - _WIRE_KEYS)
        if extra and not lines:
            raise _unstorable(
                session_id, event_type, event.seq, f"has log keys no column holds: {extra}",
                backend,
            )
        if "data" not in wire:
            raise _unstorable(session_id, event_type, event.seq, "has no data", backend)
    else:
        event_type = event.type
    seq = _int64(event.seq)
    if seq is None:
        raise _unstorable(
            session_id, event_type, event.seq, "has a seq that is no integer", backend
        )
    time = _int64(event.time)
    if time is None:
        raise _unstorable(
            session_id,
            event_type,
            event.seq,
            f"has time {event.time!r}, not integer epoch milliseconds (an integer "
            f"column)",
            backend,
        )
    sources = getattr(event, "source_event_seqs", UNSET)
    op = getattr(event, "surface_op", UNSET)
    return (
        session_id,
        seq,
        event_type,
        time,
        data,
        None if sources is UNSET else _json_text(sources),
        None if op is UNSET else _json_text(op),
    )


def _data_texts(events: Sequence[Event]) -> list[str]:
    """The ``data`` column of each event (and a last ``""``): its JSON text, in one
    msgspec call. A lone surrogate, which msgspec refuses to encode, is written escaped
    (``\\ud800``) as the event's log line writes it: ASCII, which every text column
    holds, and read back to the same line."""
    try:
        return ENCODER.encode_lines([event.data for event in events]).decode().split("\n")
    except UnicodeEncodeError:
        return [*(encode_line(event.data).decode() for event in events), ""]


#: Parameters per row of :func:`_insert_rows_sql`: the row without its session id.
PARAMS_PER_ROW: Final = 6


def event_params(
    session_id: str, events: Sequence[Event], backend: str = "SQLite", *, lines: bool = False
) -> list[object]:
    """The rows of a batch, flat, without their session id: for each event ``seq, type,
    time, data, source_event_seqs, surface_op``, an absent optional column as ``''``
    (stored as NULL: JSON text is never empty). Checked here, before any transaction.

    Flat and without ``None``: SQLite binds the session id once and ``''``, which takes
    a fifth off a 48-row insert (binding ``None`` makes the sqlite3 module look for an
    adapter); PostgreSQL slices the list into column arrays.

    :param backend: the backend's name, for the error message.
    :param lines: the batch's log lines are kept where the rows do not give them back
        (:func:`batch_rows`): an opaque event may then hold log keys no column holds.
    :raises UnstorableError: a value no column holds.
    """
    datas = _data_texts(events)
    params: list[object] = []
    extend = params.extend
    for event, data in zip(events, datas, strict=False):  # datas ends with ""
        seq, time = event.seq, event.time
        if (
            type(event) is OpaqueEvent
            or type(seq) is not int
            or type(time) is not int
            or not (_INT64_MIN <= time <= _INT64_MAX and 0 <= seq <= _INT64_MAX)
        ):
            _, *row = _event_row(session_id, event, data, backend, lines)
            row[4] = row[4] or ""
            row[5] = row[5] or ""
            extend(row)
        elif event.surface:
            sources = getattr(event, "source_event_seqs", UNSET)
            op = getattr(event, "surface_op", UNSET)
            extend((
                seq, event.type, time, data,
                "" if sources is UNSET else _json_text(sources),
                "" if op is UNSET else _json_text(op),
            ))
        else:
            extend((seq, event.type, time, data, "", ""))
    return params


def _one_a_row(jsonl: bytes, count: int) -> bool:
    """Whether ``jsonl`` is ``count`` lines, each ``\n``-ended: one an event."""
    return jsonl.count(b"\n") == count and (not count or jsonl.endswith(b"\n"))


def batch_rows(
    session_id: str, events: Sequence[Event], jsonl: bytes, backend: str = "SQLite"
) -> tuple[list[object], list[tuple[int, str]]]:
    """A batch's rows (:func:`event_params`) and the lines to keep beside them
    (:func:`kept_lines`), checked before any transaction.

    :param jsonl: the batch's log lines as appended, each ``\n``-ended. When they are
        not one an event (a caller that has none), the rows are all that is stored.
    :raises UnstorableError: a value no column holds.
    """
    lines = _one_a_row(jsonl, len(events))
    params = event_params(session_id, events, backend, lines=lines)
    return params, (kept_lines(session_id, events, params, jsonl, backend) if lines else [])


def kept_lines(
    session_id: str, events: Sequence[Event], params: Sequence[object], jsonl: bytes,
    backend: str = "SQLite",
) -> list[tuple[int, str]]:
    """The lines of a batch that its rows (``params``, :func:`event_params`) would not
    give back byte for byte, as ``(index in the batch, line)``: the backend keeps them
    beside their rows, and reads them instead of the rebuilt ones.

    A line differs when it was written in another key order (an opaque event's own
    order or keys; a tool result shaped like a crash-repair closer but written
    ``sourceEventSeqs`` first) or spelling (spaces, ``\\u`` escapes, ``1.0`` or ``1e3``:
    a log another writer wrote, copied as it is). Typed events whose lines are their
    own encoding (every batch a store flushes but a repair's) are checked in one msgspec
    call; other batches a line at a time.

    :param jsonl: the batch's lines, one an event, each ``\n``-ended.
    :raises UnstorableError: a kept line is not UTF-8 (a text column holds it).
    """
    n = PARAMS_PER_ROW
    lines = jsonl.split(b"\n")
    check: Iterable[int] = range(len(events))
    if all(type(e) is not OpaqueEvent and type(e.seq) is int and type(e.time) is int
           for e in events):
        # A typed event's encoding is its row's rebuilt line (the same encoder wrote
        # the data column, and the keys come in the same order), but for a tool result
        # shaped like a closer, whose line is rebuilt surfaceOp first.
        try:
            if encode_events(events) == jsonl:
                types = params[1::n]
                if "tool/result" not in types:
                    return []
                check = [i for i, t in enumerate(types) if t == "tool/result"]
        except (TypeError, ValueError):  # not encodable as it stands: checked below
            pass
    kept: list[tuple[int, str]] = []
    for i in check:
        o, line = i * n, lines[i]
        row: Row = (params[o], params[o + 1], params[o + 2], params[o + 3],  # type: ignore[assignment]
                    params[o + 4] or None, params[o + 5] or None)
        if rebuilt_line(row) != line:
            try:
                kept.append((i, line.decode()))
            except UnicodeDecodeError:
                raise _unstorable(session_id, str(params[o + 1]), params[o],
                                  "has a log line that is not UTF-8", backend) from None
    return kept


_HeaderRow: TypeAlias = tuple[str, int, int, "str | None", "str | None", "int | None"]


def header_row(header: SessionHeader, backend: str = "SQLite") -> _HeaderRow:
    """The ``sessions`` row of a header, checked before any transaction begins."""
    version = header.version
    created_at = _int64(header.created_at)
    if type(version) is not int or created_at is None:
        problem = (
            "has no format version (a NOT NULL column)"
            if type(version) is not int
            else f"has createdAt {header.created_at!r}, not integer epoch milliseconds"
        )
        msg = (
            f'the header of session "{header.id}" {problem}; the {backend} backend cannot '
            f"store it"
        )
        raise UnstorableError(msg, session_id=header.id, seq=None)
    for what, text in (("id", header.id), ("cwd", header.cwd),
                       ("parent session", header.parent_session)):
        if isinstance(text, str) and not utf8_ok(text):
            raise unencodable(header.id, f"the {what}", backend)
    seed_length = None if header.seed_length is UNSET else header.seed_length
    return (
        header.id,
        version,
        created_at,
        None if header.cwd is UNSET else header.cwd,
        None if header.parent_session is UNSET else header.parent_session,
        seed_length,
    )


def utf8_ok(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate), as a text column needs."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def unencodable(session_id: str, what: str, backend: str) -> UnstorableError:
    """The error for a string with a lone surrogate, which no text column holds."""
    return UnstorableError(
        f"{what} of session {session_id!r} holds a lone surrogate, which the {backend} "
        f"backend cannot store",
        session_id=session_id,
        seq=None,
    )


def summaries_in_order(headers: Sequence[SessionHeader], rows: Iterable[Sequence[Any]]
                       ) -> list[SessionSummary]:
    """The summaries of ``rows`` (a header's six columns, then the events, the turns and
    the last activity), in the order of ``headers``; a session without a row (deleted
    since it was listed) is left out."""
    by_id = {row[0]: row for row in rows}
    found = []
    for header in headers:
        row = by_id.get(header.id)
        if row is not None:
            found.append(SessionSummary(header_of(tuple(row[:6])), int(row[6]), int(row[7]),
                                        row[8]))
    return found


def header_of(row: tuple[Any, ...]) -> SessionHeader:
    session_id, version, created_at, cwd, parent, seed_length = row[:6]
    return SessionHeader(
        version=version,
        id=session_id,
        created_at=created_at,
        cwd=UNSET if cwd is None else cwd,
        parent_session=UNSET if parent is None else parent,
        seed_length=UNSET if seed_length is None else seed_length,
    )


# --- the fast load -------------------------------------------------------------------

#: One chunk of a session's lines as a database builds it: how many rows the range
#: ``[start, start + size)`` holds, and their lines, ``\n``-separated (``None`` when none).
Chunk: TypeAlias = tuple[int, "bytes | None"]


def load_chunks(
    fetchers: Sequence[Callable[[int], Chunk]], count: int, size: int,
    registry: EventRegistry,
) -> tuple[list[Event], bytes] | None:
    """A session's rows ``0 .. count-1``, fetched as lines a chunk of ``size`` rows at a
    time (``fetch(start)``) and decoded one msgspec call per chunk; ``None`` when a chunk
    does not decode or its seqs are not exactly the expected ones (the careful scan then
    decides what is kept).

    Beyond two chunks, the database builds chunks in worker threads, one per fetcher
    (chunk ``i`` by fetcher ``i % len(fetchers)``), while this thread decodes (both
    drivers release the GIL while a query runs): most of the query time hides behind
    the decoding. Each fetcher is only ever called from one thread at a time, so the
    first may use the caller's connection; the others need connections of their own.
    """
    starts = range(0, count, size)
    chunks = ((fetchers[0](start) for start in starts) if len(starts) <= 2
              else _prefetched(fetchers, starts))
    events: list[Event] = []
    blobs: list[bytes] = []
    start = 0
    try:
        for n, blob in chunks:
            # Seqs are unique (primary key) and the chunk is the range [start,
            # start+size): a full count means every seq of the range is there, so all
            # full chunks mean the rows are exactly seqs 0..count-1.
            if n != min(size, count - start) or blob is None:
                return None
            try:
                decoded = decode_body(registry, blob)
            except LogFormatError:
                return None
            if not _in_order(decoded, start, n):
                return None
            events += decoded
            blobs.append(blob)
            start += n
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # joins the workers before the connection is the caller's again
    blobs.append(b"")  # the last line's newline
    return events, b"\n".join(blobs)


def _prefetched(
    fetchers: Sequence[Callable[[int], Chunk]], starts: range
) -> Iterator[Chunk]:
    """``fetch(start)`` for each start, in order, fetched ahead by one worker thread per
    fetcher."""
    k = len(fetchers)
    results = [queue.SimpleQueue[Chunk | BaseException]() for _ in range(k)]
    stop = threading.Event()

    def work(w: int) -> None:
        try:
            for start in starts[w::k]:
                if stop.is_set():
                    return
                results[w].put(fetchers[w](start))
        except BaseException as exc:  # handed over to the loading thread
            results[w].put(exc)

    # Daemons: a load cut short at interpreter exit must not keep them alive (the
    # finally clause joins them in every other case).
    workers = [threading.Thread(target=work, args=(w,), name="dsh-session-load",
                                daemon=True) for w in range(k)]
    for worker in workers:
        worker.start()
    try:
        for i in range(len(starts)):
            item = results[i % k].get()
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        for worker in workers:
            worker.join()
