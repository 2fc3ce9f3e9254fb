"""Lossless JSON values: the check on untyped data, and its read-only forms.

The check is the one ``append`` runs on untyped data; the read-only forms
(``JsonObject``, tuples) are what untyped data is frozen into once it is in the log.

Only data without a schema comes here (unknown event types, payloads outside their
schema, ``Any``-typed fields such as ``tool/result.meta``); typed payloads are checked by
msgspec, in C. The walk is iterative, so deep but valid values never hit the recursion
limit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import msgspec

if TYPE_CHECKING:
    JsonValue: TypeAlias = (
        "bool | int | float | str | tuple[JsonValue, ...] | JsonObject | None"
    )
else:
    # msgspec reads annotations at run time; to it an untyped JSON field is ``Any``.
    JsonValue = Any

#: The deepest an event's ``data`` may nest arrays and objects: ``data`` itself is level 1,
#: so a log line (the event object around it) nests at most one level more. ``append``
#: refuses deeper data (:class:`~dsh_session_core.errors.TooDeepError`), and readers
#: refuse a line whose untyped data nests deeper, or that is too deep to decode at all,
#: as a line that does not parse. Far above anything real, and far below what msgspec
#: and the recursive helpers handle on a default stack (about 1,000 levels minus the
#: caller's frames).
MAX_JSON_DEPTH: Final = 128


class JsonDepthError(ValueError):
    """Raised by :func:`freeze` for a value nesting deeper than :data:`MAX_JSON_DEPTH`."""


class JsonObject(Mapping[str, "JsonValue"]):
    """A read-only JSON object: untyped log data, frozen so the log cannot be changed
    through it. Compares equal to a ``dict`` with the same items."""

    __slots__ = ("_d",)

    def __init__(self, items: dict[str, JsonValue]) -> None:
        self._d = items

    def __getitem__(self, key: str) -> JsonValue:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return f"JsonObject({self._d!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonObject):
            return self._d == other._d
        if isinstance(other, dict):
            return self._d == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to dicts, which are unhashable


def json_path(parts: list[str | int]) -> str:
    """Render a path as msgspec does: ``$.a[0].b``."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _key_repr(key: object) -> str:
    import reprlib

    try:
        return reprlib.repr(key)
    except RecursionError:
        return f"<a {key.__class__.__name__} nested too deep to show>"


def find_non_json(value: object) -> str | None:
    """Return the path of the first value JSON cannot carry losslessly, or ``None``.
    No depth limit: :func:`json_problem` adds one."""
    found = json_problem(value, level=None)
    return None if found is None else found[0]


def json_problem(value: object, *, level: int | None = 0) -> tuple[str, bool] | None:
    """The path of the first value JSON cannot carry losslessly, or of the first array
    or object nesting deeper than :data:`MAX_JSON_DEPTH`, with whether it is the depth
    that is wrong; ``None`` when the value is fine.

    :param level: the nesting level of the value's parent (0 for an event's ``data``,
        1 for a field of it); ``None`` checks no depth.

    Accepts exactly ``None``, ``bool``, ``int``, finite ``float``, ``str``, ``list`` and
    ``dict`` with ``str`` keys (exact types, not subclasses), plus the frozen forms
    :class:`JsonObject` with tuples inside it, the read-only form the log itself hands
    out (so logged data can be appended again). Rejects NaN and infinities, sets, bytes,
    tuples in plain data (JSON would silently turn them into lists), non-str keys, and
    cycles (a value on its own descent path). A value shared by two branches is fine.
    """
    limit = MAX_JSON_DEPTH - level if level is not None else -1
    # The common case first: a value that fits, found by a walk that builds no paths (the
    # depth limit bounds its recursion); the walk below, with paths, names a problem.
    if level is not None and _fits(value, 0, limit, False, set()):
        return None
    return _problem(value, limit)


#: The types whose values fit as they are (a float must be finite too).
_PLAIN: Final = frozenset({str, int, bool, type(None)})


def _fits(v: object, depth: int, limit: int, frozen: bool, on_path: set[int]) -> bool:
    """Whether :func:`_problem` finds nothing in ``v`` (``depth`` levels below the value
    it was given, ``limit`` levels allowed): its rules, without the paths."""
    t = type(v)
    if v is None or t is bool or t is str or t is int:
        return True
    if t is float:
        return math.isfinite(v)  # type: ignore[arg-type]
    if depth == limit and (t is dict or t is JsonObject or t is list or t is tuple
                           or isinstance(v, msgspec.Struct)):
        return False
    if t is dict or t is JsonObject or t is list or (t is tuple and frozen):
        if id(v) in on_path:
            return False
        on_path.add(id(v))
        below = depth + 1
        # A string, integer, bool or null child fits: checked without a call.
        if t is list or t is tuple:
            for child in v:  # type: ignore[attr-defined]
                if type(child) not in _PLAIN and not _fits(
                        child, below, limit, frozen, on_path):
                    return False
        else:
            inner = frozen or t is JsonObject
            items: dict[Any, Any] = v._d if t is JsonObject else v  # type: ignore[attr-defined,assignment]
            for k, child in items.items():
                if type(k) is not str or (type(child) not in _PLAIN and not _fits(
                        child, below, limit, inner, on_path)):
                    return False
        on_path.discard(id(v))
        return True
    if isinstance(v, msgspec.Struct):
        return _fits(msgspec.to_builtins(v, enc_hook=enc_hook), depth, limit, True, on_path)
    return False


def _problem(value: object, limit: int) -> tuple[str, bool] | None:
    """:func:`json_problem`'s walk, naming the path of what it finds (``limit``: the
    levels allowed, ``-1`` for no limit)."""
    # Each stack entry is (value, path, frozen, leaving): ``frozen`` marks values inside a
    # JsonObject, where tuples are the array form; ``leaving`` pops a container off the
    # current descent path once all its children were checked.
    on_path: set[int] = set()
    stack: list[tuple[object, list[str | int], bool, bool]] = [(value, [], False, False)]
    while stack:
        v, path, frozen, leaving = stack.pop()
        if leaving:
            on_path.discard(id(v))
            continue
        t = type(v)
        if v is None or t is bool or t is str or t is int:
            continue
        if t is float:
            if not math.isfinite(v):  # type: ignore[arg-type]
                return json_path(path), False
            continue
        if len(path) == limit and (
            t is dict or t is JsonObject or t is list or t is tuple
            or isinstance(v, msgspec.Struct)
        ):
            return json_path(path), True
        if t is dict or t is JsonObject:
            if id(v) in on_path:
                return json_path(path), False
            on_path.add(id(v))
            stack.append((v, path, frozen, True))
            inner = frozen or t is JsonObject
            items: dict[Any, Any] = v._d if t is JsonObject else v  # type: ignore[attr-defined,assignment]
            for k, child in items.items():
                if type(k) is not str:
                    return json_path([*path, _key_repr(k)]), False
                stack.append((child, [*path, k], inner, False))
            continue
        if t is list or (t is tuple and frozen):
            if id(v) in on_path:
                return json_path(path), False
            on_path.add(id(v))
            stack.append((v, path, frozen, True))
            for i, child in enumerate(v):  # type: ignore[arg-type]
                stack.append((child, [*path, i], frozen, False))
            continue
        if isinstance(v, msgspec.Struct):
            # A schema Struct nested in untyped data: check it in its wire shape (where
            # its typed arrays are tuples).
            stack.append((msgspec.to_builtins(v, enc_hook=enc_hook), path, True, False))
            continue
        return json_path(path), False
    return None


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_text_depth(text: bytes) -> int:
    """How deep the JSON ``text`` nests arrays and objects (a scalar is 0). Cheap when it
    holds few brackets; else its strings are cut out and the brackets walked."""
    bound = text.count(b"[") + text.count(b"{")
    if bound <= MAX_JSON_DEPTH + 1:
        return bound  # an upper bound, and within every limit
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub(b"", text)):
        if m.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


#: The types whose values :func:`freeze` returns as they are.
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any, level: int = 0) -> JsonValue:
    """Deep-copy a JSON value into its read-only form (dicts become :class:`JsonObject`,
    lists become tuples). The input must already have passed :func:`find_non_json`.

    :param level: the nesting level of the value's parent (0 for an event's ``data``,
        -1 for a whole log entry).
    :raises JsonDepthError: the value nests deeper than :data:`MAX_JSON_DEPTH`.
    """
    t = type(value)
    if t is dict or t is JsonObject:
        if level >= MAX_JSON_DEPTH:
            raise JsonDepthError(MAX_JSON_DEPTH)
        items = value._d if t is JsonObject else value
        inner = level + 1
        # A scalar is its own frozen form: kept without a call (most values are).
        return JsonObject({k: v if type(v) in _SCALARS else freeze(v, inner)
                           for k, v in items.items()})
    if t is list or t is tuple:
        if level >= MAX_JSON_DEPTH:
            raise JsonDepthError(MAX_JSON_DEPTH)
        inner = level + 1
        return tuple([v if type(v) in _SCALARS else freeze(v, inner) for v in value])
    if isinstance(value, msgspec.Struct):
        return freeze(msgspec.to_builtins(value, enc_hook=enc_hook), level)
    return value  # type: ignore[no-any-return]


def thaw(value: Any) -> Any:
    """The plain-builtin (``dict``/``list``) deep copy of a frozen or Struct value."""
    try:
        return msgspec.json.decode(msgspec.json.encode(value, enc_hook=enc_hook))
    except UnicodeEncodeError:  # a lone surrogate, which msgspec cannot encode
        return _thaw_slowly(msgspec.to_builtins(value, enc_hook=enc_hook))


def _thaw_slowly(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _thaw_slowly(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw_slowly(v) for v in value]
    return value


def enc_hook(obj: object) -> object:
    """msgspec encoder hook: frozen JSON objects encode as the dicts they wrap."""
    if type(obj) is JsonObject:
        return obj._d
    msg = f"{type(obj).__name__} is not a JSON value"
    raise NotImplementedError(msg)
