"""Strict checking: what makes a payload of a registered type fall back to opaque.

A lenient reader (the reference's) keeps a payload no schema fits verbatim, as an
opaque event: an unknown key or an unknown member of a merge-extensible union is an
extension, not an error. That is right when reading a log, and wrong when writing one:
a typo (``toolName``, ``{"type": "tool_call"}``) would go straight into the derived
messages. :func:`strict_problem` walks JSON data along its registered schema and names
the first thing no schema declares: an unknown key, an unknown union member (one that
neither core nor an installed plugin declares, see :mod:`.unions`), a missing required
field, a value of the wrong kind, each with its JSON path and the closest known name.
Strict appends (:meth:`Session.append`) raise it; ``validate --strict`` reports it.

It runs only when typed decoding failed (a payload that decodes into its Struct is
strictly valid: every Struct of the vocabulary forbids unknown keys), so the append hot
path never pays for it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Iterable
from typing import Any, Final

import msgspec
import msgspec.inspect as mi

from .. import vocabulary as v
from .unions import FAMILIES, UnionMembers, family_of_class

if typing.TYPE_CHECKING:
    from .registry import EventRegistry, RegisteredEvent

__all__ = ["StrictProblem", "closest", "strict_problem", "unknown_type_problem"]


@dataclasses.dataclass(frozen=True, slots=True)
class StrictProblem:
    """The first thing in a payload that no registered schema declares.

    :ivar path: where, as ``$.content[0].type``.
    :ivar message: what, without the place (``unknown key "isErorr"``).
    :ivar kind: ``"key"`` (unknown key), ``"member"`` (unknown union member),
        ``"missing"`` (a required field or a tag is absent) or ``"value"`` (wrong kind
        of value).
    :ivar name: the unknown key or tag (``None`` for the other kinds).
    :ivar suggestion: the closest known key or tag, or ``None``.
    :ivar family: the union, for an unknown member.
    """

    path: str
    message: str
    kind: str
    name: str | None = None
    suggestion: str | None = None
    family: str | None = None

    def describe(self, event_type: str) -> str:
        """The whole sentence: ``unknown key "isErorr" at $ of tool/result; did you mean
        "isError"?``"""
        return f"{self.message} at {self.path} of {event_type}{_mean(self.suggestion)}"


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` most likely misspells (a wrong case, ``_`` for ``-``, a
    swapped or missing letter), or ``None`` when none is close."""
    pool = list(candidates)
    folded = {c.lower().replace("_", "-"): c for c in pool}
    key = word.lower().replace("_", "-")
    if key in folded and folded[key] != word:
        return folded[key]
    found = difflib.get_close_matches(word, pool, n=1, cutoff=0.7)
    if not found:
        found = [folded[m] for m in difflib.get_close_matches(key, list(folded), n=1,
                                                               cutoff=0.7)]
    return found[0] if found else None


def _mean(suggestion: str | None) -> str:
    return f'; did you mean "{suggestion}"?' if suggestion is not None else ""


@functools.cache
def _info(cls: type[msgspec.Struct]) -> mi.StructType:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)  # narrowing: a Struct class
    return info


#: Families errors may point a misplaced tag to (a finish reason given as a turn end
#: reason): the merge-extensible ones, and the model-call finish reasons.
_OTHER_MAPS: Final = (
    *((f.label, f.name) for f in FAMILIES.values()),
    ("finish reason", "finish-reason"),
)
_FINISH_TAGS: Final = frozenset(str(c.__struct_config__.tag)
                                for c in typing.get_args(v.FinishReason))


def _elsewhere(tag: str, family: str, members: UnionMembers) -> str:
    """`` ("stop" is a finish reason)`` when ``tag`` belongs to another union."""
    for label, name in _OTHER_MAPS:
        if name == family:
            continue
        known = _FINISH_TAGS if name == "finish-reason" else members.family(name)
        if tag in known:
            return f' ("{tag}" is a {label}, not one of this union)'
    return ""


class _Walk:
    """One walk of a payload; stops at the first problem."""

    __slots__ = ("members",)

    def __init__(self, members: UnionMembers) -> None:
        self.members = members

    def value(self, value: Any, info: mi.Type, path: str) -> StrictProblem | None:
        if isinstance(info, mi.Metadata):
            return self.value(value, info.type, path)
        if isinstance(info, mi.AnyType):
            return None
        if isinstance(info, mi.UnionType):
            return self.union(value, info, path)
        if isinstance(info, mi.StructType):
            if type(value) is not dict:
                return _wrong(value, f"an object ({info.cls.__name__})", path)
            return self.struct(value, info, path)
        if isinstance(info, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
            if type(value) is not list:
                return _wrong(value, "an array", path)
            for i, item in enumerate(value):
                found = self.value(item, info.item_type, f"{path}[{i}]")
                if found is not None:
                    return found
            return None
        if isinstance(info, mi.TupleType):
            if type(value) is not list or len(value) != len(info.item_types):
                return _wrong(value, f"an array of {len(info.item_types)}", path)
            for i, (item, t) in enumerate(zip(value, info.item_types, strict=True)):
                found = self.value(item, t, f"{path}[{i}]")
                if found is not None:
                    return found
            return None
        if isinstance(info, mi.DictType):
            if type(value) is not dict:
                return _wrong(value, "an object", path)
            for key, item in value.items():
                found = self.value(item, info.value_type, f"{path}.{key}")
                if found is not None:
                    return found
            return None
        return None if _leaf_ok(value, info) else _wrong(value, _leaf_name(info), path)

    def union(self, value: Any, info: mi.UnionType, path: str) -> StrictProblem | None:
        structs = [t for t in info.types if isinstance(t, mi.StructType)]
        family = next((f for t in structs if (f := family_of_class(t.cls)) is not None), None)
        if family is not None and type(value) is dict:
            return self.member(value, family, path)
        if type(value) is dict and len(structs) == 1:
            return self.struct(value, structs[0], path)
        others = [t for t in info.types if not isinstance(t, mi.StructType)]
        if any(self.value(value, t, path) is None for t in others):
            return None
        if structs and type(value) is dict:
            return self.struct(value, structs[0], path)
        names = [_leaf_name(t) for t in others] + [f"an object ({t.cls.__name__})"
                                                   for t in structs]
        return _wrong(value, " or ".join(names), path)

    def member(self, value: dict[str, Any], family: str, path: str) -> StrictProblem | None:
        fam = FAMILIES[family]
        tag = value.get(fam.tag_field)
        where = f"{path}.{fam.tag_field}"
        if tag is None:
            return StrictProblem(path, f'a {fam.label} without its "{fam.tag_field}"',
                                 "missing", fam.tag_field)
        if type(tag) is not str:
            return _wrong(tag, "a string", where)
        found = self.members.get(family, tag)
        if found is None:
            known = self.members.family(family)
            suggestion = closest(tag, known)
            message = f'unknown {fam.label} "{tag}"{_elsewhere(tag, family, self.members)}'
            return StrictProblem(where, message, "member", tag, suggestion, family)
        return self.struct(value, _info(found.struct), path)

    def struct(self, value: dict[str, Any], info: mi.StructType, path: str
               ) -> StrictProblem | None:
        fields = {f.encode_name: f for f in info.fields}
        for key in value:
            if key not in fields and key != info.tag_field:
                suggestion = closest(key, [k for k in fields if k not in value])
                message = f'unknown key "{key}"'
                return StrictProblem(path, message, "key", key, suggestion)
        for name, f in fields.items():
            if name not in value:
                if f.required:
                    return StrictProblem(path, f'missing required key "{name}"', "missing",
                                         name)
                continue
            found = self.value(value[name], f.type, f"{path}.{name}")
            if found is not None:
                return found
        return None


def _wrong(value: Any, expected: str, path: str) -> StrictProblem:
    shown = "null" if value is None else type(value).__name__
    return StrictProblem(path, f"expected {expected}, got {shown}", "value")


def _leaf_ok(value: Any, info: mi.Type) -> bool:
    kind = type(value)
    if isinstance(info, mi.StrType):
        return kind is str
    if isinstance(info, mi.IntType):
        return kind is int
    if isinstance(info, mi.FloatType):
        return kind is int or kind is float
    if isinstance(info, mi.BoolType):
        return kind is bool
    if isinstance(info, mi.NoneType):
        return value is None
    if isinstance(info, mi.LiteralType):
        return any(value == x and type(x) is kind for x in info.values)
    return True  # what JSON cannot hold is not in the vocabulary; nothing else to check


def _leaf_name(info: mi.Type) -> str:
    if isinstance(info, mi.LiteralType):
        return " or ".join(map(repr, info.values))
    return {mi.StrType: "a string", mi.IntType: "an integer", mi.FloatType: "a number",
            mi.BoolType: "true or false", mi.NoneType: "null"}.get(type(info), "a value")


def strict_problem(registry: EventRegistry, entry: RegisteredEvent, data: Any
                   ) -> StrictProblem | None:
    """The first part of JSON ``data`` (plain builtins) that ``entry``'s schema, with the
    union members of ``registry``, does not declare; ``None`` when every part is
    declared (a payload holding a plugin's union member is then valid, though opaque)."""
    return _Walk(registry.members).value(data, _info(entry.payload), "$")


def _installed(distribution: str) -> bool:
    from importlib import metadata

    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def unknown_type_problem(registry: EventRegistry, event_type: str) -> tuple[str, str | None]:
    """Why a strict append refuses ``event_type`` (declared by no plugin), and the
    closest registered type."""
    from .._base.known_plugins import DISTRIBUTIONS, missing_plugin_hint

    suggestion = closest(event_type, registry.types)
    hint = missing_plugin_hint(event_type)
    distribution = DISTRIBUTIONS.get(event_type.split("/", 1)[0])
    if hint is not None and distribution is not None and _installed(distribution):
        # Installed, yet not in this registry: a bare Session knows core's types only.
        message = (f'unknown event type "{event_type}": its plugin ({distribution}) is '
                   f"installed, but this session's registry does not hold it; create the "
                   f"session from a store (SessionStore(), open_store()), or pass "
                   f"Session(registry=store.registry)")
    else:
        message = f'unknown event type "{event_type}": no installed plugin declares it'
        if hint:
            message += f" ({hint})"
    return message + _mean(suggestion), suggestion
