"""The reference's JSONL log format: a header line, then one event per line.

:func:`parse_log` reads a log *as is*: every line after the header must parse (a torn
last line is an error here; the durable backends' recovery rules drop it instead).
Events keep whatever no installed plugin knows, verbatim. :func:`dump_log` writes a
header and events back, each line the compact JSON the reference writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ._codec import ENCODER, encode_events
from ._decode import decode_body
from ._header import SessionHeader
from ._registry import EventRegistry
from .errors import LogFormatError
from .events import Event

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["ParsedLog", "dump_log", "open_session", "parse_header", "parse_log"]

_header_decoder = msgspec.json.Decoder(SessionHeader)


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
    except msgspec.DecodeError as exc:
        msg = f"corrupt session log: header line is not valid JSON ({exc})"
        raise LogFormatError(msg, path=path, line=1) from exc
    except msgspec.ValidationError as exc:
        msg = f"corrupt session log: first line is not a session header ({exc})"
        raise LogFormatError(msg, path=path, line=1) from exc


def parse_log(data: bytes, registry: EventRegistry, *, path: str | None = None) -> ParsedLog:
    """Read a whole JSONL log as is.

    :param data: the file's bytes.
    :param registry: the event types to decode into; others stay opaque.
    :param path: the file, for error messages.
    :raises LogFormatError: empty log, bad header, or a line that is not JSON (with its
        1-based line number in the file).
    """
    if not data.strip(b"\n"):
        msg = "empty or header-less session log"
        raise LogFormatError(msg, path=path)
    end = data.find(b"\n")
    if end < 0:
        end = len(data)
    header = parse_header(data[:end], path=path)
    body = data[end + 1 :]
    try:
        events = decode_body(registry, body)
    except LogFormatError as exc:
        line = (exc.line or 0) + 2
        msg = f"unparsable event at line {line}: {exc}"
        raise LogFormatError(msg, path=path, line=line) from exc
    return ParsedLog(header, events, body if body.endswith(b"\n") else body + b"\n")

def open_session(log: ParsedLog, registry: EventRegistry) -> Session:
    """A bare session seeded with a parsed log (its lines are not re-encoded)."""
    from ._session import Session

    return Session(
        log.header.id, log.events, log.header, registry=registry, seed_jsonl=log.jsonl
    )


def dump_log(header: SessionHeader, events: Sequence[Event]) -> bytes:
    """The JSONL bytes of a log: header line, then one line per event, each ``\\n``-ended."""
    return ENCODER.encode(header) + b"\n" + encode_events(events)
