"""How a message names a seq that is not the one expected.

A log is JSON, and a seq of the wrong JSON type prints like the right one in a template
string: the string ``"5"``, where 5 is expected, read ``has seq 5 (expected 5)``. Every
message about a seq that is not its index names the value as JSON does (``"5"``,
``true``, ``null``, ``5.0``) and, unless it is a number, what type it is instead.
"""

from __future__ import annotations

import math

from ..jscompat import UNDEFINED

__all__ = ["event_seq", "got_seq", "seq_mismatch"]


def event_seq(event: object) -> object:
    """An event's seq as its line holds it: :data:`~.jscompat.UNDEFINED` when the line
    has none (an opaque event's ``seq`` is None then, as for ``"seq": null``)."""
    from ..events import OpaqueEvent

    if type(event) is OpaqueEvent and "seq" not in event.wire:
        return UNDEFINED
    return getattr(event, "seq", UNDEFINED)


def _json_text(value: object) -> str:
    from ..jscompat import json_stringify

    if isinstance(value, float):
        if math.isfinite(value):
            return repr(value)  # as the log writes it: 5.0, not JavaScript's 5
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    try:
        text = json_stringify(value)
    except (NotImplementedError, TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(value: object) -> str | None:
    """What JSON type ``value`` is, when it is not an integer (None: it is one)."""
    from collections.abc import Mapping

    if value is UNDEFINED:
        return "absent"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return "not a finite number"
        return "written as a float" if value.is_integer() else "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__


def got_seq(value: object) -> str:
    """``value`` after "got": ``7``, ``1.5``, ``the string "5"``, ``the boolean true``,
    ``null``, ``no seq`` (:data:`~.jscompat.UNDEFINED`: the key is absent)."""
    if value is UNDEFINED:
        return "no seq"
    kind = _kind(value)
    text = _json_text(value)
    if kind is None or kind == "null" or isinstance(value, float):
        return text
    return f"the {kind.split(' ', 1)[-1]} {text}"


def seq_mismatch(value: object, expected: int) -> str:
    """``value`` and the seq expected, after "has seq": ``7 (expected 5)``, ``"5" (a
    string; expected the number 5)``, ``5.0 (written as a float; expected the integer
    5)``."""
    kind = _kind(value)
    if kind is None:
        return f"{_json_text(value)} (expected {expected})"
    if value is UNDEFINED:
        return f"none (the key is absent; expected {expected})"
    if value is None:
        return f"null (expected the number {expected})"
    wanted = "the integer" if isinstance(value, float) else "the number"
    return f"{_json_text(value)} ({kind}; expected {wanted} {expected})"
