"""The merge-extensible unions of the vocabulary, and the members plugins add to them.

The seeds make five families of tagged values open to extension, as TypeScript
declaration merging opens the reference's maps: content-block kinds, stream-chunk kinds,
turn triggers, turn-end reasons and message-source kinds. Core's own members are the
static unions of :mod:`dsh_session_core.vocabulary`; a plugin contributes more through the
``register_union_members`` hook, each a msgspec Struct tagged like its family
(:class:`UnionMember`). This module owns the family table: which families exist, their
tag fields, the core members, and the frozen per-registry table of every member with
its owner (:class:`UnionMembers`), which strict appends and ``dsh-session events`` read.

Typed decoding stays the static unions' (a log is read exactly as the reference reads
it): a payload holding a plugin's member is kept verbatim as an opaque event, and is
*valid* when its plugin is installed (strict appends accept it, ``validate --strict``
does not report it) and opaque-with-a-reason when it is not.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Final, final

import msgspec

from .. import vocabulary as v
from ..errors import DuplicateUnionMemberError, PluginError

__all__ = ["FAMILIES", "Family", "RegisteredMember", "UnionMember", "UnionMembers"]


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Family:
    """One merge-extensible union.

    :ivar name: its name in the hook and the catalog (``"content-block"``).
    :ivar label: how errors name one member (``"content block kind"``).
    :ivar tag_field: the wire key holding a member's tag (``"type"`` or ``"kind"``).
    :ivar core: core's members, from the static union of the vocabulary.
    """

    name: str
    label: str
    tag_field: str
    core: tuple[type[msgspec.Struct], ...]


def _members(alias: object) -> tuple[type[msgspec.Struct], ...]:
    return tuple(typing.get_args(alias))


#: The families, by name. Their order is the catalog's.
FAMILIES: Final[Mapping[str, Family]] = MappingProxyType({
    f.name: f
    for f in (
        Family("content-block", "content block kind", "type", _members(v.ContentBlock)),
        Family("stream-chunk", "stream chunk kind", "type", _members(v.StreamChunk)),
        Family("turn-trigger", "turn trigger", "kind", _members(v.TurnTrigger)),
        Family("turn-end-reason", "turn end reason", "kind", _members(v.TurnEndReason)),
        Family("message-source", "message source kind", "kind", _members(v.MessageSource)),
    )
})

#: Which family a core member class belongs to: a union position of the schema is a
#: family when its members are that family's core classes.
_FAMILY_OF_CLASS: Final[Mapping[type, str]] = MappingProxyType(
    {cls: f.name for f in FAMILIES.values() for cls in f.core}
)


def family_of_class(cls: type) -> str | None:
    """The family whose core member ``cls`` is, or ``None``."""
    return _FAMILY_OF_CLASS.get(cls)


def tag_of(cls: type[msgspec.Struct]) -> object:
    """The tag a tagged Struct class carries on the wire (``None`` when untagged)."""
    return cls.__struct_config__.tag


@dataclasses.dataclass(frozen=True, slots=True)
class UnionMember:
    """What a plugin declares for one member of a merge-extensible union.

    :param family: the family's name: ``"content-block"``, ``"stream-chunk"``,
        ``"turn-trigger"``, ``"turn-end-reason"`` or ``"message-source"``.
    :param struct: a msgspec Struct tagged with the member's tag, on the family's tag
        field, e.g. ``class ImageBlock(Struct, tag_field="type", tag="image",
        rename="camel", forbid_unknown_fields=True)``.
    :param doc: one line for the catalog; defaults to the first paragraph of the
        struct's docstring.
    """

    family: str
    struct: type[msgspec.Struct]
    doc: str = ""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class RegisteredMember:
    """One member of a family, with its provenance (``plugin`` is ``"core"`` for core's)."""

    family: str
    tag: str
    struct: type[msgspec.Struct]
    doc: str
    plugin: str


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def _checked(plugin: str, member: object) -> tuple[Family, str]:
    """The family and tag of a declared member, or a :class:`PluginError` saying what
    to fix."""
    if not isinstance(member, UnionMember):
        msg = (f"plugin {plugin!r}: register_union_members must return UnionMember entries, "
               f"got {member!r}")
        raise PluginError(msg)
    family = FAMILIES.get(member.family)
    if family is None:
        msg = (f"plugin {plugin!r} declared a member of the unknown union {member.family!r}; "
               f"the merge-extensible unions are {', '.join(map(repr, FAMILIES))}")
        raise PluginError(msg)
    cls: object = member.struct  # typed, but a plugin may pass anything
    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        msg = f"plugin {plugin!r}: a {family.name} member must be a msgspec Struct, got {cls!r}"
        raise PluginError(msg)
    config = cls.__struct_config__
    tag = config.tag
    if config.tag_field != family.tag_field or not isinstance(tag, str) or not tag:
        msg = (f"plugin {plugin!r}: {cls.__qualname__} must be tagged on {family.tag_field!r} "
               f"like every {family.label}, e.g. class {cls.__name__}(msgspec.Struct, "
               f"tag_field={family.tag_field!r}, tag=\"my-kind\")")
        raise PluginError(msg)
    return family, tag


@final
class UnionMembers:
    """The frozen table of every family's members, core's and the plugins'.

    Built once per registry; a tag declared twice in one family makes the build fail
    naming both owners (:class:`~dsh_session_core.errors.DuplicateUnionMemberError`).
    """

    __slots__ = ("_by_family",)

    def __init__(self, declared: Iterable[tuple[str, UnionMember]] = ()) -> None:
        table: dict[str, dict[str, RegisteredMember]] = {}
        for family in FAMILIES.values():
            table[family.name] = {
                str(tag_of(cls)): RegisteredMember(
                    family.name, str(tag_of(cls)), cls, _first_paragraph(cls.__doc__), "core"
                )
                for cls in family.core
            }
        undocumented: list[str] = []
        for plugin, member in declared:
            family, tag = _checked(plugin, member)
            members = table[family.name]
            if tag in members:
                raise DuplicateUnionMemberError(family.name, tag,
                                                (members[tag].plugin, plugin))
            doc = member.doc or _first_paragraph(member.struct.__doc__)
            if not doc:
                undocumented.append(f"{family.name} {tag!r} (plugin {plugin!r})")
            members[tag] = RegisteredMember(family.name, tag, member.struct, doc, plugin)
        if undocumented:
            msg = (f"{len(undocumented)} union member(s) without a doc line (the catalog "
                   f"needs one; give the struct a docstring or pass UnionMember(doc=...)): "
                   + ", ".join(undocumented))
            raise PluginError(msg)
        self._by_family: Mapping[str, Mapping[str, RegisteredMember]] = MappingProxyType(
            {name: MappingProxyType(members) for name, members in table.items()}
        )

    def family(self, name: str) -> Mapping[str, RegisteredMember]:
        """The members of one family, by tag (core's first, then in declaration order)."""
        return self._by_family[name]

    def get(self, family: str, tag: object) -> RegisteredMember | None:
        """The member of ``family`` tagged ``tag``, or ``None``."""
        members = self._by_family.get(family)
        if members is None or not isinstance(tag, str):
            return None
        return members.get(tag)

    def __iter__(self) -> Iterator[RegisteredMember]:
        for members in self._by_family.values():
            yield from members.values()

    def contributed(self) -> list[RegisteredMember]:
        """The members plugins added (not core's)."""
        return [m for m in self if m.plugin != "core"]

    def __repr__(self) -> str:
        return f"<UnionMembers: {len(self.contributed())} contributed>"
