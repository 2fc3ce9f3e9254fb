"""Encoding events and headers to their log lines.

A typed event encodes, in one msgspec call, to exactly its reference log line (field
order and camelCase names are declared on the classes). An opaque event encodes its
verbatim ``wire`` object. Nothing here depends on the registry, so encoding never needs
the plugins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from .._base.json_values import enc_hook
from ..events import Event, OpaqueEvent
from ..jscompat import json_stringify

__all__ = ["ENCODER", "encode_event", "encode_events", "encode_line", "to_wire"]

#: The one encoder: compact separators, UTF-8 written raw, key order as declared or
#: logged, and frozen JSON objects unwrapped. Its output matches JS ``JSON.stringify``
#: byte for byte for every value a reference log can hold, except floats whose JS form
#: differs (JS writes ``1e+21`` and ``1`` where Python has ``1e21`` and ``1.0``).
ENCODER = msgspec.json.Encoder(enc_hook=enc_hook)

_encode = ENCODER.encode
_decode = msgspec.json.Decoder().decode


def encode_line(value: object) -> bytes:
    """One value's compact JSON (an event's log line, a header line...)."""
    try:
        return _encode(value)
    except UnicodeEncodeError:
        # A lone surrogate, which msgspec refuses: written as JS writes it.
        return json_stringify(value).encode()


def encode_event(event: Event) -> bytes:
    """One event's log line, without the newline."""
    if type(event) is OpaqueEvent:
        return encode_line(event.wire)
    return encode_line(event)


def to_wire(value: object) -> Any:
    """Any event, message, payload or frozen value in its wire shape, as plain builtins
    (``dict``, ``list``...) with the log's camelCase keys: what the reference would hold
    after ``JSON.parse`` of its log line. A fresh copy, free to change."""
    if isinstance(value, Event):
        return _decode(encode_event(value))
    return _decode(_encode(value))


def encode_events(events: Sequence[Event]) -> bytes:
    """The log lines of ``events``, each ending with ``\\n``.

    Typed runs are encoded by msgspec in one call each; only opaque events (rare: logs
    from plugins not installed here) cost a Python-level step.
    """
    if not events:
        return b""
    try:
        return _encode_events(events)
    except UnicodeEncodeError:  # a lone surrogate somewhere: line by line
        return b"".join(encode_event(e) + b"\n" for e in events)


def _encode_events(events: Sequence[Event]) -> bytes:
    parts: list[bytes] = []
    start = 0
    for i, ev in enumerate(events):
        if type(ev) is OpaqueEvent:
            if i > start:
                parts.append(ENCODER.encode_lines(events[start:i]))
            parts.append(_encode(ev.wire) + b"\n")
            start = i + 1
    if start == 0:
        return ENCODER.encode_lines(events)
    if start < len(events):
        parts.append(ENCODER.encode_lines(events[start:]))
    return b"".join(parts)
