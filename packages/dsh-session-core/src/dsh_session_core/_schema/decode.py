"""Turning log lines (or wire-shape dicts) into events.

The fast path decodes a whole run of lines in one msgspec call into typed events. When
any line does not fit a registered schema, the run is decoded line by line, and each
line that does not fit becomes an :class:`OpaqueEvent`, kept verbatim. Untyped payload
fields (``Any`` in a schema) are frozen so that no event can be changed after the fact.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .._base.json_values import (
    MAX_JSON_DEPTH,
    JsonDepthError,
    JsonObject,
    freeze,
    json_problem,
    thaw,
)
from ..errors import LogFormatError
from ..events import Event, OpaqueEvent
from ..jscompat import json_parse
from .registry import EventRegistry, RegisteredEvent

__all__ = [
    "decode_body",
    "decode_line",
    "decode_lines",
    "decode_wire",
    "freeze_untyped",
    "is_too_deep",
    "opaque_from_wire",
    "ops_first",
]

# The reference's crash repair writes ``surfaceOp`` before ``sourceEventSeqs``; typed
# classes always encode the other way round, so such lines are kept verbatim (opaque).
_OPS_FIRST = re.compile(rb'"surfaceOp":(?:"append"|\{[^{}]*\}),"sourceEventSeqs":')


def ops_first(event: Event) -> OpaqueEvent:
    """``event`` (a surface event) kept verbatim with its surface keys in the order the
    reference's crash repair writes them: ``surfaceOp`` before ``sourceEventSeqs``."""
    wire = thaw(event)
    ordered = {k: wire[k] for k in ("type", "seq", "time", "data", "surfaceOp") if k in wire}
    if "sourceEventSeqs" in wire:
        ordered["sourceEventSeqs"] = wire["sourceEventSeqs"]
    return opaque_from_wire(ordered)


def _deep_freeze(value: Any, level: int) -> Any:
    """Freeze the untyped parts of a (possibly typed) value; unchanged values stay.
    ``level`` is the nesting level of the value's parent (see :func:`freeze`)."""
    t = type(value)
    if t is dict or t is list:
        return freeze(value, level)
    if t is tuple:
        items = tuple(_deep_freeze(v, level + 1) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, msgspec.Struct):
        changes = {}
        for name in value.__struct_fields__:
            old = getattr(value, name)
            new = _deep_freeze(old, level + 1)
            if new is not old:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    return value


def freeze_untyped(entry: RegisteredEvent, payload: Any) -> Any:
    """``payload`` with its untyped fields frozen (a new Struct only when needed).

    :raises JsonDepthError: an untyped field nests deeper than :data:`MAX_JSON_DEPTH`.
    """
    changes = {}
    for name in entry.untyped_fields:
        old = getattr(payload, name)
        new = _deep_freeze(old, 1)
        if new is not old:
            changes[name] = new
    return msgspec.structs.replace(payload, **changes) if changes else payload


def _fix_untyped(registry: EventRegistry, events: list[Event]) -> None:
    # Only a few types have untyped fields; find their events at C speed first.
    untyped = {r.event: r for r in registry if r.untyped_fields}
    if not untyped:
        return
    types = list(map(type, events))
    for i in itertools.compress(range(len(types)), map(untyped.__contains__, types)):
        ev = events[i]
        data = freeze_untyped(untyped[types[i]], ev.data)
        if data is not ev.data:
            events[i] = msgspec.structs.replace(ev, data=data)


def opaque_from_wire(wire: object) -> OpaqueEvent:
    """An opaque event from one parsed log entry (any JSON value).

    :raises JsonDepthError: its data nests deeper than :data:`MAX_JSON_DEPTH`.
    """
    frozen = freeze(wire, -1)
    if isinstance(frozen, JsonObject):
        seq, time, data = frozen.get("seq"), frozen.get("time"), frozen.get("data")
    else:
        seq = time = data = None
        frozen = JsonObject({"": frozen})  # not an object: keep it, it will fail seeding
    return OpaqueEvent(seq, time, data, wire=frozen)  # type: ignore[arg-type]


# Any JSON value, as the reference's JSON.parse reads it (lone surrogate escapes included).
_parse_generic = json_parse

#: Why a line nesting too deep is refused (it reads as a line that does not parse).
TOO_DEEP: Final = (
    f"nests arrays and objects deeper than {MAX_JSON_DEPTH} levels in its data, "
    f"the most this implementation reads"
)


def _too_deep() -> LogFormatError:
    """The refusal of a line nesting too deep: raised (``from None``) only while the
    :class:`JsonDepthError` or :class:`RecursionError` that found it is handled, which
    stays its ``__context__`` (:func:`is_too_deep`)."""
    return LogFormatError(TOO_DEEP)


def is_too_deep(exc: BaseException) -> bool:
    """Whether ``exc`` is :func:`decode_line`'s refusal of a line nesting deeper than
    :data:`MAX_JSON_DEPTH` allows (its message :data:`TOO_DEEP`), told by the error it
    was raised from, not by its message."""
    return isinstance(exc, LogFormatError) and isinstance(
        exc.__context__, JsonDepthError | RecursionError)


def _opaque_line(line: bytes) -> Event:
    try:
        return opaque_from_wire(_parse_generic(line))
    except (JsonDepthError, RecursionError):
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as exc:
        msg = f"not JSON ({exc})"
        raise LogFormatError(msg) from exc


def decode_line(registry: EventRegistry, line: bytes) -> Event:
    """One log line as an event: typed when a schema fits, else opaque.

    :raises LogFormatError: the line is not JSON, or nests deeper than
        :data:`MAX_JSON_DEPTH` allows (its message is then :data:`TOO_DEEP`).
    """
    if _OPS_FIRST.search(line):
        return _opaque_line(line)
    try:
        event: Event = registry.line_decoder.decode(line)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        return _opaque_line(line)
    except RecursionError:
        raise _too_deep() from None
    else:
        entry = registry.get(event.type)
        if entry is not None and entry.untyped_fields:
            try:
                data = freeze_untyped(entry, event.data)
            except JsonDepthError:
                raise _too_deep() from None
            if data is not event.data:
                event = msgspec.structs.replace(event, data=data)
        return event
    # An unknown type (or a known type whose payload does not fit) can still hold a line
    # msgspec cannot read, such as a lone surrogate escape.
    return _opaque_line(line)


def decode_lines(registry: EventRegistry, lines: list[bytes]) -> list[Event]:
    """Complete log lines (no newlines) as events, in one C call when all are typed.

    :raises LogFormatError: a line is not JSON; ``line`` is its index in ``lines``.
    """
    return decode_body(registry, b"\n".join(lines)) if lines else []


def _decode_each(registry: EventRegistry, lines: list[bytes]) -> list[Event]:
    events = []
    for i, line in enumerate(lines):
        try:
            events.append(decode_line(registry, line))
        except LogFormatError as exc:
            raise LogFormatError(str(exc), line=i) from exc
    return events


def decode_body(registry: EventRegistry, body: bytes) -> list[Event]:
    """The events of a block of log lines (``\\n``-separated, optionally ``\\n``-ended).

    JSON strings cannot hold a raw newline, so turning newlines into commas makes the
    block one JSON array: decoded in one C call, without splitting it into lines.

    :raises LogFormatError: a line is not JSON; ``line`` is its 0-based index.
    """
    if not body:
        return []
    # Where the lines end (before a last newline), found without copying the block:
    # a long log is copied twice here, once to turn newlines into commas, once to
    # bracket the array.
    end = len(body) - 1 if body.endswith(b"\n") else len(body)
    if not end or _OPS_FIRST.search(body, 0, end):  # one empty line; or lines kept verbatim
        return _decode_each(registry, body[:end].split(b"\n"))
    try:
        events: list[Event] = registry.list_decoder.decode(
            b"".join((b"[", memoryview(body.replace(b"\n", b","))[:end], b"]"))
        )
        _fix_untyped(registry, events)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, JsonDepthError):
        # RecursionError, JsonDepthError: a line nests too deep; line by line, to name it.
        return _decode_each(registry, body[:end].split(b"\n"))
    return events


def decode_wire(registry: EventRegistry, obj: object) -> Event:
    """An event from its wire shape as plain builtins (a parsed log entry).

    :raises LogFormatError: ``obj`` holds a value that JSON cannot carry.
    """
    if isinstance(obj, Event):
        return obj
    bad = json_problem(obj, level=-1)
    if bad is not None:
        if bad[1]:
            msg = f"log entry {TOO_DEEP} (at {bad[0]})"
        else:
            msg = f"log entry holds a non-JSON value at {bad[0]}"
        raise LogFormatError(msg)
    if isinstance(obj, Mapping) and "surfaceOp" in obj and "sourceEventSeqs" in obj:
        keys = list(obj)
        if keys.index("surfaceOp") < keys.index("sourceEventSeqs"):
            return opaque_from_wire(obj)
    try:
        event: Event = msgspec.convert(obj, registry.line_decoder.type)
    except (msgspec.ValidationError, UnicodeEncodeError):
        # UnicodeEncodeError: a type (a tag) holding a lone surrogate, which msgspec
        # cannot compare with the registered ones: no schema's, so kept as it is.
        return opaque_from_wire(obj)
    entry = registry.get(event.type)
    if entry is not None and entry.untyped_fields:
        event = msgspec.structs.replace(event, data=freeze_untyped(entry, event.data))
    return event

