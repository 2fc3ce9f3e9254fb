"""How an append is checked off its fast path, and the errors it raises.

:meth:`Session.append <dsh_session_core.Session.append>` decodes a payload against its
type's schema first; only what that could not decode (or a schema's ``Any`` fields)
comes here: the JSON check, the strict check (an unknown type, key or union member), the
schema's own account of a mismatch, and the surface op's provenance seqs. Each refusal
is built here with its message, so that the Session keeps to the log itself.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

from msgspec import UNSET

from .._base.json_values import MAX_JSON_DEPTH, freeze, json_problem, thaw
from .._schema.decode import freeze_untyped
from .._schema.registry import EventRegistry, RegisteredEvent
from .._schema.strict import strict_problem, unknown_type_problem
from .._schema.validate import schema_problem
from ..errors import (
    EventTypeError,
    NotJsonError,
    SchemaError,
    SurfaceIntentError,
    TooDeepError,
    UnknownEventTypeError,
    UnknownFieldError,
    UnknownMemberError,
)

__all__ = [
    "checked_seqs",
    "checked_untyped",
    "misplaced_op",
    "missing_op",
    "not_json",
    "shown",
    "too_deep",
    "untyped_payload",
]


def checked_untyped(
    entry: RegisteredEvent, payload: Any, type: str, seq: int
) -> Any:
    # msgspec passes Any-typed values through by reference: check them as JSON here.
    for name in entry.untyped_fields:
        value = getattr(payload, name)
        if value is UNSET:
            continue
        bad = json_problem(value, level=1)
        if bad is not None:
            path = f"$.{name}{bad[0][1:]}"
            if bad[1]:
                raise too_deep(type, seq, value, 1, path)
            raise not_json(type, seq, path)
    return freeze_untyped(entry, payload)


def untyped_payload(
    registry: EventRegistry,
    strict: bool,
    foreign: tuple[str, ...],
    entry: RegisteredEvent | None,
    type: object,
    data: Any,
    seq: int,
) -> Any:
    """Check data no schema accepted; return its frozen form, or raise."""
    if not isinstance(type, str):  # the caller's type is not checked before here
        msg = (
            f"the event type must be a string such as \"user/message\", not {shown(type)}; "
            f"pass the type first, then the data"
        )
        raise EventTypeError(msg, event_type=shown(type), seq=seq)
    try:
        type.encode()
    except UnicodeEncodeError:
        # A type is a name a plugin registers; one with a lone surrogate is no one's,
        # and a database's type column (text) could not hold it: refused here, on
        # every store alike, rather than failing a SQLite store's every later flush.
        msg = (f"the event type {shown(type)} holds a lone surrogate: an event type "
               f"must be text with a UTF-8 form, such as \"user/message\"")
        raise EventTypeError(msg, event_type=shown(type), seq=seq) from None
    bad = json_problem(data)
    if bad is not None:
        if bad[1]:
            raise too_deep(type, seq, data, 0, bad[0])
        raise not_json(type, seq, bad[0])
    if strict and not _is_foreign(foreign, type):
        _check_strict(registry, entry, type, data, seq)
    if entry is None:
        return freeze(data)
    problem = schema_problem(entry, data)
    if problem is not None:
        path, head = problem
        msg = (
            f'session event "{type}" does not match the schema '
            f"{entry.payload.__name__} registered by plugin {entry.plugin!r}: {head} "
            f"at {path}; fix the payload, or check the event type"
        )
        raise SchemaError(msg, event_type=type, seq=seq, path=path, plugin=entry.plugin)
    return freeze(data)


def _is_foreign(foreign: tuple[str, ...], type: str) -> bool:
    return bool(foreign) and any(fnmatch.fnmatchcase(type, p) for p in foreign)


def _check_strict(registry: EventRegistry, entry: RegisteredEvent | None, type: str,
                  data: Any, seq: int) -> None:
    """Refuse what the lenient path would keep opaquely (only reached when typed
    decoding failed, so the hot path never pays for it)."""
    if entry is None:
        message, suggestion = unknown_type_problem(registry, type)
        msg = (f"{message}{'' if message.endswith('?') else '.'} To append it verbatim "
               f"anyway, list it in foreign_types or open the store with strict=False")
        raise UnknownEventTypeError(msg, event_type=type, seq=seq, suggestion=suggestion)
    found = strict_problem(registry, entry, thaw(data))
    if found is None:
        return  # a plugin's union member, or a mismatch schema_problem names
    if found.kind in ("key", "member") or schema_problem(entry, data) is None:
        advice = "fix the payload, or open the store with strict=False to keep foreign " \
                 "data verbatim"
    else:
        # A wrong kind of value or a missing field: a lenient store refuses it too,
        # so strict=False is no way out (it only keeps unknown keys and kinds).
        advice = "fix the payload (a store opened with strict=False refuses it too)"
    msg = (f"{found.describe(type)} (schema {entry.payload.__name__} of plugin "
           f"{entry.plugin!r}); {advice}")
    if found.kind == "key":
        raise UnknownFieldError(msg, event_type=type, seq=seq, path=found.path,
                                plugin=entry.plugin, key=found.name or "",
                                suggestion=found.suggestion)
    if found.kind == "member":
        raise UnknownMemberError(msg, event_type=type, seq=seq, path=found.path,
                                 plugin=entry.plugin, family=found.family or "",
                                 tag=found.name or "", suggestion=found.suggestion)
    raise SchemaError(msg, event_type=type, seq=seq, path=found.path, plugin=entry.plugin)


def not_json(type: str, seq: int, path: str) -> NotJsonError:
    msg = f'session event "{type}" carries non-JSON-serializable data'
    return NotJsonError(f"{msg} (at {path})", event_type=type, seq=seq, path=path)


def shown(value: object) -> str:
    """A caller's value in a message: ``repr``, cut short (it may be huge or deep)."""
    import reprlib

    try:
        return reprlib.repr(value)
    except RecursionError:
        return f"<a {value.__class__.__name__} nested too deep to show>"
    except Exception:  # a caller's own __repr__ failing must not hide the refusal
        return f"<a {value.__class__.__name__}>"


def too_deep(
    type: str, seq: int, value: object, level: int, path: str | None = None
) -> TooDeepError:
    if path is None:
        found = json_problem(value, level=level)
        path = found[0] if found is not None else "$"
    msg = (
        f'session event "{type}" nests arrays and objects deeper than {MAX_JSON_DEPTH} '
        f"levels (at {path}), the most a log line may hold; flatten the value, or carry "
        f"it as a JSON string"
    )
    return TooDeepError(msg, event_type=type, seq=seq, path=path, limit=MAX_JSON_DEPTH)


def missing_op(type: str, seq: int) -> SurfaceIntentError:
    msg = f'session event "{type}" is surface-eligible and requires a surfaceOp marker'
    return SurfaceIntentError(msg, event_type=type, seq=seq)


def misplaced_op(type: str, seq: int, surface_op: object) -> SurfaceIntentError:
    field = "surfaceOp" if surface_op is not None else "sourceEventSeqs"
    msg = (
        f"{type} cannot carry {field} (non-surface event); only surface types "
        f"(user/message, assistant/message, tool/result, context/message, steering/message) "
        f"join the surface"
    )
    return SurfaceIntentError(msg, event_type=type, seq=seq)


def checked_seqs(
    type: str, seqs: Iterable[int] | None, seq: int
) -> tuple[int, ...] | Any:
    if seqs is None:
        return UNSET
    if isinstance(seqs, str | bytes | bytearray | Mapping) or not isinstance(seqs, Iterable):
        msg = (
            f'session event "{type}" has sourceEventSeqs {shown(seqs)}: pass a list of integers '
            f"(the seqs of the events it derives from)"
        )
        raise SurfaceIntentError(msg, event_type=type, seq=seq)
    out = tuple(seqs)
    for s in out:
        if s.__class__ is not int:
            msg = f'session event "{type}" has a non-integer sourceEventSeqs entry {shown(s)}'
            raise SurfaceIntentError(msg, event_type=type, seq=seq)
    return out
