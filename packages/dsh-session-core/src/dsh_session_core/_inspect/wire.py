"""Values as JSON for a reader.

Any value (a row, a timeline, a header) as one compact line, an event as its log line, a
log line back as its wire shape. Lone surrogates (which a reference log may hold, and
msgspec refuses) are written and read as JavaScript does, so nothing a log holds makes a
display fail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..events import Event

__all__ = ["encode_json", "event_line", "line_wire"]


def encode_json(value: object) -> bytes:
    """``value`` as one line of compact JSON (no newline)."""
    from .._schema.codec import encode_line

    return encode_line(value)


def event_line(event: Event) -> bytes:
    """An event's log line (no newline): an opaque event's exactly as it was read."""
    from .._schema.codec import encode_event

    return encode_event(event)


def line_wire(line: bytes) -> dict[str, Any] | None:
    """One log line's wire shape, or ``None`` when it is not a JSON object."""
    from .._logformat.logfile import line_wire as wire

    return wire(line)
