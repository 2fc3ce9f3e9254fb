"""Checking untyped data against a schema, and checking a whole log.

A payload that fits no schema exactly may still be valid: the vocabulary is
merge-extensible, so keys a schema does not know and kinds (tags) it does not know are
extensions, kept verbatim. :func:`schema_problem` strips those and checks the rest, so
a typo in a known field is still caught. :func:`check_events` reports every event of a
loaded log that breaks its registered schema (the strict check behind lenient loading).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from typing import Any

import msgspec
import msgspec.inspect as mi

from .._base.json_values import thaw
from .._base.known_plugins import missing_plugin_hint
from ..events import Event, OpaqueEvent
from .registry import EventRegistry, RegisteredEvent
from .strict import strict_problem

__all__ = ["Problem", "check_events", "schema_problem"]

# msgspec says where a value failed as "... - at `$.a[0].b`" (keys are not escaped: a key
# may hold a backtick, so the path is everything after the last " - at `").
_AT = re.compile(r" - at `(\$.*)`\Z", re.S)
_UNKNOWN_TAG = re.compile(r"^Invalid value '[^']*'")
_SURROGATE = re.compile("[\ud800-\udfff]")


@functools.cache
def _schema(payload: type[msgspec.Struct]) -> mi.Type:
    return mi.type_info(payload)


def _plain(text: str) -> str:
    # msgspec cannot compare a string holding a lone surrogate with a literal or a tag
    # (it raises UnicodeEncodeError); U+FFFD matches them no more than the surrogate does.
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def _known(value: Any, info: mi.Type) -> Any:
    """A copy of the JSON ``value`` (plain builtins) without what ``info`` leaves open:
    the keys its structs do not know (extensions), and lone surrogates (see
    :func:`_plain`). What lies below an unknown kind of a union is kept as it is."""
    if type(value) is str:
        return _plain(value)
    if isinstance(info, mi.Metadata):
        return _known(value, info.type)
    if isinstance(info, mi.UnionType):
        return _known(value, _member(value, info))
    if type(value) is dict:
        if isinstance(info, mi.StructType):
            fields = {f.encode_name: f.type for f in info.fields}
            out: dict[str, Any] = {}
            for k, v in value.items():
                if k in fields:
                    out[k] = _known(v, fields[k])
                elif k == info.tag_field:
                    out[k] = _plain(v) if type(v) is str else v
            return out
        if isinstance(info, mi.DictType):
            return {_plain(k): _known(v, info.value_type) for k, v in value.items()}
        return {_plain(k): _known(v, mi.AnyType()) for k, v in value.items()}
    if type(value) is list:
        if isinstance(info, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
            return [_known(v, info.item_type) for v in value]
        if isinstance(info, mi.TupleType) and len(info.item_types) == len(value):
            return [_known(v, t) for v, t in zip(value, info.item_types, strict=True)]
        return [_known(v, mi.AnyType()) for v in value]
    return value


def _member(value: Any, union: mi.UnionType) -> mi.Type:
    """The member of ``union`` that ``value`` would be read as (``AnyType`` when none
    is, or for an unknown kind: then ``value`` is only cleaned, not cut)."""
    if type(value) is dict:
        structs = [t for t in union.types if isinstance(t, mi.StructType)]
        tagged = [t for t in structs if t.tag_field is not None]
        if tagged:
            tag = value.get(tagged[0].tag_field)
            for t in tagged:
                if t.tag == tag:
                    return t
            return mi.AnyType()
        if len(structs) == 1:
            return structs[0]
        for member in union.types:
            if isinstance(member, mi.DictType):
                return member
        return mi.AnyType()
    if type(value) is list:
        for member in union.types:
            if isinstance(member, mi.ListType | mi.VarTupleType | mi.TupleType | mi.SetType
                          | mi.FrozenSetType):
                return member
    return mi.AnyType()


def schema_problem(entry: RegisteredEvent, data: Any) -> tuple[str, str] | None:
    """Why JSON ``data`` breaks ``entry``'s schema, as ``(path, message)``, or ``None``.

    Unknown keys and unknown kinds of extensible unions are allowed (and what lies
    below an unknown kind is not checked further). Keys may hold any character: the
    unknown ones are cut by walking the schema, not by reading msgspec's messages.
    """
    work = _known(thaw(data), _schema(entry.payload))
    try:
        msgspec.convert(work, entry.payload)
    except msgspec.ValidationError as exc:
        text = str(exc)
        m = _AT.search(text)
        path = m.group(1) if m else "$"
        head = text[: m.start()] if m else text
        if _UNKNOWN_TAG.match(head) and path.rsplit(".", 1)[-1] in ("type", "kind"):
            return None
        return path, head
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One event of a log that breaks its schema (or, when strict, is of no known type)."""

    seq: object
    type: str
    plugin: str | None
    path: str
    message: str

    def __str__(self) -> str:
        owner = f" (plugin {self.plugin!r})" if self.plugin else ""
        return f"seq {self.seq} {self.type}{owner}: {self.message} at {self.path}"


def _envelope_problem(event: OpaqueEvent, entry: RegisteredEvent) -> tuple[str, str] | None:
    wire = event.wire
    for key in wire:
        if key not in ("type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"):
            return f"$.{key}", "unknown envelope key"
    if not entry.surface:
        for key in ("sourceEventSeqs", "surfaceOp"):
            if key in wire:
                return f"$.{key}", f"{entry.type} cannot carry {key} (non-surface event)"
    if type(wire.get("seq")) is not int:
        return "$.seq", "seq is not an integer"
    time = wire.get("time")
    if type(time) not in (int, float):
        return "$.time", "time is not a number"
    return None


def check_events(
    events: Iterable[Event], registry: EventRegistry, *, strict: bool = False
) -> list[Problem]:
    """Every event that breaks its registered schema; with ``strict``, also every event
    of a type no registered plugin declares, and every payload of a registered type that
    only loaded opaquely (an unknown key, an unknown union member), with the path of
    what made it opaque. (:func:`check_log` checks a whole log as the loaders do.)"""
    problems: list[Problem] = []
    for ev in events:
        if type(ev) is not OpaqueEvent:
            continue  # a typed event fitted its schema when it was decoded
        entry = registry.get(ev.type)
        if entry is None:
            if strict:
                hint = missing_plugin_hint(ev.type)
                message = "no installed plugin declares it" + (f"; {hint}" if hint else "")
                problems.append(Problem(ev.seq, ev.type, None, "$.type", message))
            continue
        found = _envelope_problem(ev, entry)
        if found is None:
            found = schema_problem(entry, ev.data)
            if found is not None:
                found = ("$.data" + found[0][1:], found[1])
            elif strict:
                # Valid for a lenient reader, but only opaquely: say what made it so
                # (a plugin's union member that is installed makes it valid).
                opaque = strict_problem(registry, entry, thaw(ev.data))
                if opaque is not None:
                    mean = (f' (did you mean "{opaque.suggestion}"?)'
                            if opaque.suggestion is not None else "")
                    found = ("$.data" + opaque.path[1:],
                             f"loaded opaquely: {opaque.message}{mean}")
        if found is not None:
            problems.append(Problem(ev.seq, ev.type, entry.plugin, found[0], found[1]))
    return problems
