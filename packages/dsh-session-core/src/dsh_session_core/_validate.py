"""Checking untyped data against a schema, and checking a whole log.

A payload that fits no schema exactly may still be valid: the vocabulary is
merge-extensible, so keys a schema does not know and kinds (tags) it does not know are
extensions, kept verbatim. :func:`schema_problem` strips those and checks the rest, so
a typo in a known field is still caught. :func:`check_events` reports every event of a
loaded log that breaks its registered schema (the strict check behind lenient loading).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

import msgspec

from ._json import thaw
from ._known_plugins import missing_plugin_hint
from ._registry import EventRegistry, RegisteredEvent
from .events import Event, OpaqueEvent

__all__ = ["Problem", "check_events", "schema_problem"]

# msgspec says where a value failed as "... - at `$.a[0].b`".
_AT = re.compile(r" - at `(\$[^`]*)`$")
_UNKNOWN_FIELD = re.compile(r"^Object contains unknown field `([^`]*)`")
_UNKNOWN_TAG = re.compile(r"^Invalid value '[^']*'")
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _path_parts(path: str) -> list[str | int]:
    return [k if k else int(i) for k, i in _PATH_PART.findall(path[1:])]


def schema_problem(entry: RegisteredEvent, data: Any) -> tuple[str, str] | None:
    """Why JSON ``data`` breaks ``entry``'s schema, as ``(path, message)``, or ``None``.

    Unknown keys and unknown kinds of extensible unions are allowed (and what lies
    below an unknown kind is not checked further).
    """
    work = thaw(data)
    while True:
        try:
            msgspec.convert(work, entry.payload)
        except msgspec.ValidationError as exc:
            text = str(exc)
            m = _AT.search(text)
            path = m.group(1) if m else "$"
            head = text[: m.start()] if m else text
            unknown = _UNKNOWN_FIELD.match(head)
            if unknown is not None:
                target: Any = work
                for part in _path_parts(path):
                    target = target[part]
                del target[unknown.group(1)]
                continue
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
    of a type no registered plugin declares."""
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
        if found is not None:
            problems.append(Problem(ev.seq, ev.type, entry.plugin, found[0], found[1]))
    return problems
