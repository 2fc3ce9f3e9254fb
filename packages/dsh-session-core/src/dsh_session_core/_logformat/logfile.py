"""The reference's JSONL log format, and the one place that reads it.

A log is a header line, then one event per line, each ``\\n``-ended. Everything that
reads such bytes reads them here, whoever holds them (the JSONL backend, the CLI on a
file, ``derive --recover``, ``repair``, ``ls``, ``tail``):

- **as is** (strict): :func:`parse_log` — every line after the header must parse (a torn
  last line is an error); events keep whatever no installed plugin knows, verbatim;
- **as a durable backend loads it**: :func:`scan_log`, the reference's ``scanLog`` — the
  longest valid prefix, a torn tail reported, committed corruption refused, a header
  checked as the reference checks it (:func:`durable_header`);
- **leniently**, to show what can be shown: :func:`read_lenient` — a version-less header
  is accepted, a line that does not parse is skipped and reported;
- **from the end**, without reading the rest: :func:`complete_end`, :func:`last_lines`,
  :func:`count_log` (events, turns and last activity, without decoding JSON), and one
  line's wire shape, :func:`line_wire`.

:func:`dump_log` writes a header and events back, each line the compact JSON the
reference writes. Beside it, on the same side: reading a log file from its end and
following it (:mod:`._logformat.tail`), a compact log's zstd frames (:mod:`.frames`), and
where a log's history ends (:mod:`.end`). Where logs live on disk and how they are
written is the JSONL backend's concern (``_persistence/backends/jsonl/``: its
``buckets``, ``paths``, ``files``), not this module's.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Final, NamedTuple

import msgspec

from .._base.json_values import JsonDepthError, find_non_json
from .._schema.codec import ENCODER, encode_events
from .._schema.decode import TOO_DEEP, decode_body, decode_line, is_too_deep, opaque_from_wire
from .._schema.header import SessionHeader
from .._schema.registry import EventRegistry
from ..errors import LogFormatError
from ..events import Event, OpaqueEvent
from ..jscompat import json_parse

if TYPE_CHECKING:
    from .._model.session import Session

__all__ = [
    "TURN_LINE",
    "LenientLog",
    "LogCounts",
    "ParsedLog",
    "ScanResult",
    "complete_end",
    "count_file",
    "count_log",
    "dump_log",
    "durable_header",
    "last_lines",
    "line_wire",
    "not_a_header_at_all",
    "open_session",
    "parse_header",
    "parse_log",
    "read_lenient",
    "scan_log",
]

_header_decoder = msgspec.json.Decoder(SessionHeader)

_EMPTY: Final = "empty or header-less session log"
_NOT_NEWLINE: Final = re.compile(rb"[^\n]")
_HEADER_NOT_JSON: Final = "corrupt session log: header line is not valid JSON"
_NOT_A_HEADER: Final = "corrupt session log: first line is not a session header"

_seq_of = operator.attrgetter("seq")
_JSON_SPACE = b" \t\r\n"


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedLog:
    """A log read from JSONL: its header and its events, in file order."""

    header: SessionHeader
    events: list[Event]
    #: The event lines exactly as read (``\\n``-ended), to seed a session without
    #: re-encoding them.
    jsonl: bytes


def parse_header(line: bytes, *, path: str | None = None) -> SessionHeader:
    """Line 1 of a log as a session header.

    :raises LogFormatError: the line is not a session header.
    """
    try:
        return _header_decoder.decode(line)
    except RecursionError:
        msg = f"corrupt session log: header line is not valid JSON (it {TOO_DEEP})"
        raise LogFormatError(msg, path=path, line=1) from None
    except msgspec.ValidationError as exc:  # first: it is a DecodeError too
        msg = f"corrupt session log: first line is not a session header ({exc})"
        raise LogFormatError(msg, path=path, line=1) from exc
    except msgspec.DecodeError as exc:
        # msgspec refuses a lone surrogate escape that JSON.parse reads: name it as the
        # durable reading does, so every reader gives the same verdict on the header.
        obj = _parse_json(line)
        if type(obj) is dict:
            _refuse_surrogate_fields(obj, path)
        msg = f"corrupt session log: header line is not valid JSON ({exc})"
        raise LogFormatError(msg, path=path, line=1) from exc


def not_a_header_at_all(line: bytes) -> str | None:
    """Why ``line``, the first line of a file, is no session header, not even a damaged
    one (the file is not a log: another file given by mistake), or None when it may be
    a header that was damaged (an object of ``"type": "session"``, or text that reads
    like one cut or mangled). For a message: no reader decides anything by it."""
    text = line.strip(_JSON_SPACE)
    obj = _parse_json(text)
    if obj is _HOLE:
        if text.startswith(b"{") and b'"session"' in text:
            return None
        return "its first line is not JSON"
    if type(obj) is not dict:
        kind = {list: "an array", str: "a string", bool: "a boolean"}.get(
            type(obj), "null" if obj is None else "a number")
        return f"its first line is JSON ({kind}), not a session header"
    etype = obj.get("type")
    if etype == "session":
        return None
    if type(etype) is str:
        return f'its first line is an event of type "{etype[:60]}", not a session header'
    return 'its first line is a JSON object without "type": "session", not a session header'


def parse_log(data: bytes, registry: EventRegistry, *, path: str | None = None) -> ParsedLog:
    """Read a whole JSONL log as is.

    :param data: the file's bytes.
    :param registry: the event types to decode into; others stay opaque.
    :param path: the file, for error messages.
    :raises LogFormatError: empty log, bad header, or a line that is not JSON (with its
        1-based line number in the file).
    """
    header, body = _split_header(data, path)
    try:
        events = decode_body(registry, body)
    except LogFormatError as exc:
        line = (exc.line or 0) + 2
        msg = f"unparsable event at line {line}: {exc}"
        raise LogFormatError(msg, path=path, line=line) from exc
    return ParsedLog(header, events, body if body.endswith(b"\n") else body + b"\n")


def _split_header(data: bytes, path: str | None) -> tuple[SessionHeader, bytes]:
    """The lenient header of a whole log and the bytes after its line.

    :raises LogFormatError: an empty log, or a first line that is not a header.
    """
    if _NOT_NEWLINE.search(data) is None:  # only newlines (a strip would copy the log)
        raise LogFormatError(_EMPTY, path=path)
    end = data.find(b"\n")
    if end < 0:
        end = len(data)
    return parse_header(data[:end], path=path), data[end + 1 :]


# --- the durable reading: the reference's scanLog ----------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ScanResult:
    """What :func:`scan_log` keeps of a log.

    :ivar header: the session header (line 1).
    :ivar events: the longest valid prefix of the event lines, contiguous from seq 0.
    :ivar committed_bytes: where that prefix ends in the file (the end of the header
        line when no event is kept); any byte after it is a torn tail.
    :ivar jsonl: the kept event lines exactly as read, each ``\\n``-ended.
    """

    header: SessionHeader
    events: list[Event]
    committed_bytes: int
    jsonl: bytes


class _Hole:
    """Marks a line JavaScript's ``JSON.parse`` would refuse."""


_HOLE: Final = _Hole()


def _parse_json(line: bytes) -> Any:
    """``line`` as JSON, accepting exactly what ``JSON.parse`` accepts, or :data:`_HOLE`."""
    try:
        return json_parse(line)
    except (ValueError, RecursionError):  # includes UnicodeDecodeError, JSONDecodeError
        return _HOLE


def _as_int(value: Any) -> Any:
    # JSON ``0.0`` is the number 0 to JavaScript; our header holds ints.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float  # never bool (spec §14.15)


def durable_header(line: bytes, *, path: str | None) -> SessionHeader:
    """Line 1 as a session header, checked as the reference checks it.

    :func:`parse_header` is lenient (it reads hand-written logs without a version); a
    durable log must carry a numeric ``version``, so the line is decoded generically and
    checked field by field first.

    :raises LogFormatError: the line is not JSON, or not a header the reference reads.
    """
    obj = _parse_json(line)
    if obj is _HOLE:
        raise LogFormatError(_HEADER_NOT_JSON, path=path, line=1)
    if not (
        type(obj) is dict
        and obj.get("type") == "session"
        and _is_number(obj.get("version"))
        and type(obj.get("id")) is str
        and _is_number(obj.get("createdAt"))
    ):
        raise LogFormatError(_NOT_A_HEADER, path=path, line=1)
    _refuse_surrogate_fields(obj, path)
    # Extra keys are dropped; an optional key holding null counts as absent (our header
    # cannot hold null; the reference copies it).
    fields = {"type": "session", "version": _as_int(obj["version"]), "id": obj["id"],
              "createdAt": obj["createdAt"]}
    for key in ("cwd", "parentSession", "seedLength"):
        value = obj.get(key)
        if value is not None:
            fields[key] = _as_int(value)
    try:
        return msgspec.convert(fields, SessionHeader)
    except msgspec.ValidationError as exc:
        # A header the reference would read but ours cannot hold (a fractional version,
        # a non-string cwd): refused with the reference's words and the detail.
        msg = f"{_NOT_A_HEADER} ({exc})"
        raise LogFormatError(msg, path=path, line=1) from exc


def _refuse_surrogate_fields(obj: dict[str, Any], path: str | None) -> None:
    """Refuse a header whose id, cwd or parent session holds a lone surrogate.

    ``JSON.parse`` reads such an escape, but the string has no UTF-8 form: no store can
    name, index or rewrite the session (``create`` refuses these), so every reader —
    ``derive``, ``--recover``, ``repair`` and ``store.open`` — refuses the log alike.

    :raises LogFormatError: one of the three holds a lone surrogate.
    """
    for key in ("id", "cwd", "parentSession"):
        value = obj.get(key)
        if type(value) is not str:
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            msg = (f"corrupt session log: the header's {key} {value!r} holds a lone "
                   f"surrogate (U+{ord(value[exc.start]):04X}), which has no UTF-8 form, "
                   f"so no store can hold this session")
            raise LogFormatError(msg, path=path, line=1) from None


def _fast_events(registry: EventRegistry, body: bytes) -> list[Event] | None:
    """The events of ``body`` when every line is a valid event with ``seq == index`` —
    the common case, checked at C speed — else ``None`` (the careful walk decides).

    ``decode_body`` decodes the whole block in one msgspec call. A line holding two
    JSON values (``{..},{..}``) would decode to two events, so the event count must
    equal the line count. A typed event's seq is an int; only an opaque event (kept
    verbatim) can hold a bool seq or, through the core's stdlib fallback, ``NaN``, so
    those two JavaScript differences are checked on opaque events only.
    """
    try:
        events = decode_body(registry, body)
    except (LogFormatError, msgspec.DecodeError):
        # DecodeError: the core's decode_line lets one out for an unknown type with a
        # lone surrogate escape; the careful walk reads such lines itself.
        return None
    n = len(events)
    if n != body.count(b"\n") or not all(map(operator.eq, map(_seq_of, events), range(n))):
        return None
    if OpaqueEvent in set(map(type, events)):
        opaque = [e for e in events if type(e) is OpaqueEvent]
        if any(type(e.seq) is bool for e in opaque):
            return None
        if (b"NaN" in body or b"Infinity" in body) and any(
            find_non_json(e.wire) is not None for e in opaque
        ):
            return None
    return events


def _event_of(registry: EventRegistry, line: bytes) -> Event | str | None:
    """One event line as an event, or ``None`` for a hole: a line ``JSON.parse`` refuses,
    or (a documented divergence, spec §14.16) a JSON value that is not an object; or
    :data:`TOO_DEEP` for a line nesting deeper than this implementation reads (a hole
    too, with its reason)."""
    try:
        event = decode_line(registry, line)
    except (LogFormatError, msgspec.DecodeError) as exc:
        if is_too_deep(exc):
            return TOO_DEEP
        wire = _parse_json(line)
        if wire is _HOLE:
            return None
        try:
            event = opaque_from_wire(wire)
        except JsonDepthError:
            return TOO_DEEP
    else:
        # The core's fallback parser reads NaN/Infinity, which JS refuses.
        if (
            type(event) is OpaqueEvent
            and (b"NaN" in line or b"Infinity" in line)
            and _parse_json(line) is _HOLE
        ):
            return None
    if not line.lstrip(_JSON_SPACE).startswith(b"{"):
        return None
    return event


def _got_seq(event: Event) -> str:
    """An event's seq for the gap error: as JSON writes it, with its type unless it is a
    number (JavaScript's template string would print the string "5" as 5)."""
    from .._schema.seq_text import event_seq, got_seq

    return got_seq(event_seq(event))


def _careful_scan(
    registry: EventRegistry, data: bytes, start: int, end: int, *, path: str | None
) -> tuple[list[Event], int]:
    """The reference's walk (spec §9.4 steps 3-6), line by line: the kept events and
    where they end. Only logs with a hole or a gap come here."""
    parsed: list[Event | str | None] = []
    ends: list[int] = []
    last_turn_end = -1
    pos = start
    while pos < end:
        nl = data.index(b"\n", pos, end)
        event = _event_of(registry, data[pos:nl])
        if isinstance(event, Event) and event.type == "turn/end":
            last_turn_end = len(parsed)  # its own seq does not matter here
        parsed.append(event)
        ends.append(nl + 1)
        pos = nl + 1
    for i, event in enumerate(parsed):
        if not isinstance(event, Event):
            if i <= last_turn_end:
                msg = f"corrupt session log: unparsable committed event at line {i + 1}"
                if event is not None:
                    msg += f" (seq {i}: it {event})"
                raise LogFormatError(msg, path=path, line=i + 2)
        else:
            seq = event.seq
            if _is_number(seq) and seq == i:
                continue
            if i <= last_turn_end:
                msg = (
                    f"corrupt session log: seq gap in committed region at line {i + 1} "
                    f"(expected {i}, got {_got_seq(event)})"
                )
                raise LogFormatError(msg, path=path, line=i + 2)
        # A torn tail: keep what came before, drop this line and everything after it.
        return [e for e in parsed[:i] if isinstance(e, Event)], ends[i - 1] if i else start
    return [e for e in parsed if isinstance(e, Event)], ends[-1] if ends else start


def scan_log(data: bytes, registry: EventRegistry, *, path: str | None = None) -> ScanResult:
    """Read a JSONL log as the reference's ``scanLog`` does (spec §9.4).

    Only ``\\n``-ended lines count (a last fragment is never parsed). Line 1 must be a
    session header. Every event line is parsed on its own; the kept prefix is the
    longest run where line *i* parses and has ``seq == i``. A hole at or before the last
    ``turn/end`` is committed corruption; after it, a torn tail (its bytes, valid lines
    included, are past ``committed_bytes``).

    A well-formed log is decoded in one msgspec call and checked at C speed; only a log
    with a hole or a gap is walked line by line.

    :param path: the file, for error messages.
    :raises LogFormatError: no complete line, a bad header, or committed corruption
        (``line`` is the file line; the message names the 1-based event line, as the
        reference's does).
    """
    last_nl = data.rfind(b"\n")
    if last_nl < 0:
        raise LogFormatError(_EMPTY, path=path)
    header_end = data.find(b"\n")
    header = durable_header(data[:header_end], path=path)
    start, end = header_end + 1, last_nl + 1
    if start == end:
        return ScanResult(header, [], start, b"")
    body = data[start:end]
    events = _fast_events(registry, body)
    if events is not None:
        return ScanResult(header, events, end, body)
    events, committed = _careful_scan(registry, data, start, end, path=path)
    return ScanResult(header, events, committed, data[start:committed])


def open_session(log: ParsedLog, registry: EventRegistry) -> Session:
    """A bare session seeded with a parsed log (its lines are not re-encoded)."""
    from .._model.session import Session

    return Session(
        log.header.id, log.events, log.header, registry=registry, seed_jsonl=log.jsonl
    )


def dump_log(header: SessionHeader, events: Sequence[Event]) -> bytes:
    """The JSONL bytes of a log: header line, then one line per event, each ``\\n``-ended."""
    return ENCODER.encode(header) + b"\n" + encode_events(events)


# --- the lenient reading: what can be shown ----------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class LenientLog:
    """What :func:`read_lenient` could read of a log.

    :ivar header: its header (a version-less one is accepted).
    :ivar events: every event line that parses, in file order (seqs as found).
    :ivar skipped: the lines that were skipped, as ``(file line number, "blank", "not
        JSON" or "too deep")``.
    :ivar torn: the size of an unparsable last line without its newline (a torn write),
        else 0.
    """

    header: SessionHeader
    events: list[Event]
    skipped: list[tuple[int, str]]
    torn: int


def read_lenient(data: bytes, registry: EventRegistry, *, path: str | None = None
                 ) -> LenientLog:
    """Read a log as far as it can be read: a bad line is skipped, not an error.

    A last line without its newline is read when it parses (a writer that never ends
    its last line), else reported as torn.

    :raises LogFormatError: an empty log, or a first line that is not a header.
    """
    header, body = _split_header(data, path)
    cut = body.rfind(b"\n") + 1
    complete, fragment = body[:cut], body[cut:]
    skipped: list[tuple[int, str]] = []
    try:
        events = decode_body(registry, complete)
    except LogFormatError:
        events = []
        for i, line in enumerate(complete[:-1].split(b"\n")):
            try:
                events.append(decode_line(registry, line))
            except LogFormatError as exc:
                reason = "too deep" if is_too_deep(exc) else "not JSON"
                skipped.append((i + 2, "blank" if not line.strip() else reason))
    torn = 0
    if fragment.strip():
        try:
            events.append(decode_line(registry, fragment))
        except LogFormatError:
            torn = len(fragment)
    return LenientLog(header, events, skipped, torn)


def line_wire(line: bytes) -> dict[str, Any] | None:
    """One log line's wire shape, or ``None`` when it is not a JSON object. Lenient:
    lone surrogate escapes, which msgspec refuses and JavaScript writes, are read."""
    try:
        value = json_parse(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# --- reading from the end ----------------------------------------------------------------

#: What counts as a turn in a log: a line that starts with this (after its newline). A
#: JSON string cannot hold a raw newline, so the pattern cannot match inside a text, and
#: the writers always write ``type`` first.
TURN_LINE: Final = b'\n{"type":"turn/start",'

#: Blocks read backwards from the end; chunks read forwards by :func:`count_log`.
_BLOCK: Final = 65536
_COUNT_CHUNK: Final = 1 << 20


def complete_end(f: BinaryIO, size: int) -> int:
    """Where the first ``size`` bytes' last complete line ends (0 when none has ended),
    read backwards in blocks."""
    pos = size
    while pos > 0:
        step = min(_BLOCK, pos)
        f.seek(pos - step)
        nl = f.read(step).rfind(b"\n")
        if nl >= 0:
            return pos - step + nl + 1
        pos -= step
    return 0


def last_lines(f: BinaryIO, end: int, n: int, *, block: int = _BLOCK) -> list[bytes]:
    """The last ``n`` complete lines (without their newline) of the file's first ``end``
    bytes, read backwards in blocks, so a big log costs only its tail.

    ``end`` must be just past a newline (or 0). The file's first line (the header) is
    never returned.
    """
    if n <= 0 or end <= 0:
        return []
    buf = b""
    pos = end
    # n + 1 newlines before the end delimit n lines; reaching the start of the file
    # means every line is there (and the first is the header).
    while pos > 0 and buf.count(b"\n") <= n:
        step = min(block, pos)
        pos -= step
        f.seek(pos)
        buf = f.read(step) + buf
    # The first piece is the header (at the start of the file) or a partial line.
    lines = buf[:-1].split(b"\n")[1:]
    return lines[-n:]


class LogCounts(NamedTuple):
    """A log's size as ``ls`` shows it (:func:`count_log`)."""

    #: Complete lines after the header.
    events: int
    #: Complete lines that start a turn (:data:`TURN_LINE`).
    turns: int
    #: The ``time`` of the last complete line, when it is a JSON object, else ``None``.
    last_activity: Any
    #: Whether bytes follow the last complete line (a torn write, or a live writer's).
    torn: bool


def count_log(path: str) -> LogCounts:
    """Count a log file's events and turns without decoding JSON: one sequential read
    in 1 MiB chunks, then its last line read from the end for the last activity.

    :raises OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        return count_file(f)


def count_file(f: BinaryIO) -> LogCounts:
    """:func:`count_log` of an open log, read from where it stands (its start)."""
    lines = turns = 0
    tail = b""
    while chunk := f.read(_COUNT_CHUNK):
        lines += chunk.count(b"\n")
        window = tail + chunk  # a turn line may straddle two chunks
        turns += window.count(TURN_LINE)
        tail = window[-(len(TURN_LINE) - 1) :]
    size = f.tell()
    end = complete_end(f, size)
    last = last_lines(f, end, 1)
    wire = line_wire(last[0]) if last else None
    return LogCounts(max(lines - 1, 0), turns, None if wire is None else wire.get("time"),
                     end < size)
