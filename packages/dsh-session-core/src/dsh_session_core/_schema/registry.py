"""The event registry: which event types exist, who declared them, and how to decode them.

Plugins contribute :class:`EventSpec` entries through the ``register_event_types`` hook;
the registry records, for each type, its event class, payload schema, surface badge, doc
line and declaring plugin, checks that no type is declared twice, and is then frozen.
Building it also builds, once, the decoders every load and append use.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import sys
from collections.abc import Iterable, Iterator
from types import MappingProxyType
from typing import Any, Union, final

import msgspec
import msgspec.inspect as mi

from .._base.json_values import MAX_JSON_DEPTH
from ..errors import DuplicateEventTypeError, PluginError
from ..events import Event, OpaqueEvent, SurfaceEvent
from .projections import Projection, check_projections
from .unions import UnionMember, UnionMembers

__all__ = ["EventRegistry", "EventSpec", "RegisteredEvent"]


@dataclasses.dataclass(frozen=True, slots=True)
class EventSpec:
    """What a plugin declares for one event type.

    :param event: the event class: a subclass of :class:`~dsh_session_core.Event` (or of
        :class:`~dsh_session_core.SurfaceEvent` for a message-producing type) whose
        ``tag`` is the type string and whose ``data`` annotation is the payload Struct.
    :param doc: one line for the catalog; defaults to the first paragraph of the event
        class's docstring.
    :param raw: a raw record of an adapter: the framework's own record, kept whole so
        that the framework reads back exactly what it stored, whose content the typed
        events written with it tell (its typed twins: ``user/message``,
        ``assistant/message``, ``tool/call``...). Readers that show a session as the
        conversation (``dsh-session show``, the viewer) fold it away unless asked for
        it (``show --raw``, the viewer's toggle); nothing else treats it otherwise.
    """

    event: type[Event]
    doc: str = ""
    raw: bool = False


@final
@dataclasses.dataclass(frozen=True, slots=True)
class RegisteredEvent:
    """One registry entry, with its provenance."""

    type: str
    event: builtins.type[Event]
    payload: builtins.type[msgspec.Struct]
    surface: bool
    doc: str
    plugin: str
    #: Payload fields that may hold untyped JSON (``Any``): frozen after decoding.
    untyped_fields: tuple[str, ...]
    #: The length past which an appended line of this type is checked against the depth
    #: limit: ``2 * (MAX_JSON_DEPTH + 1)`` (a shorter line cannot nest that deep) when the
    #: typed schema itself nests without bound (a block holding blocks), else never.
    deep_line: int = sys.maxsize
    #: A raw record of an adapter, folded away by readers of the conversation
    #: (:attr:`EventSpec.raw`).
    raw: bool = False


def _event_type_of(cls: type[Event]) -> str:
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str) or "/" not in tag:
        msg = (
            f"event class {cls.__qualname__} must be tagged with a 'scope/name' type string, "
            f"e.g. class {cls.__name__}(Event, tag='myplugin/thing')"
        )
        raise PluginError(msg)
    return tag


def _bind_type(cls: type[Event], tag: str) -> None:
    """Give a registered event class its type as a plain class attribute, so that
    ``event.type`` is read without the property's call (a tenth of its cost: the log's
    readers, writers and indexes ask it of every event). Set once per class; the
    property stays for a class no registry has seen."""
    if cls.__dict__.get("type") != tag:
        type.__setattr__(cls, "type", tag)


@functools.cache  # a class's fields never change; reading them is most of a registry
def _payload_of(cls: type[Event]) -> type[msgspec.Struct]:
    for f in msgspec.structs.fields(cls):
        if f.name == "data":
            tp = f.type
            if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
                return tp
    msg = f"event class {cls.__qualname__} must annotate `data` with a msgspec Struct payload"
    raise PluginError(msg)


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def _holds_untyped(info: mi.Type, seen: set[int]) -> bool:
    """Whether a msgspec type tree can hold untyped (Any) JSON somewhere below it."""
    if isinstance(info, mi.AnyType):
        return True
    if isinstance(info, mi.StructType):
        if id(info.cls) in seen:
            return False
        seen.add(id(info.cls))
        return any(_holds_untyped(f.type, seen) for f in info.fields)
    if isinstance(info, (mi.ListType, mi.TupleType, mi.VarTupleType, mi.SetType,
                         mi.FrozenSetType)):
        items = info.item_type if not isinstance(info, mi.TupleType) else None
        if items is not None:
            return _holds_untyped(items, seen)
        return any(_holds_untyped(t, seen) for t in info.item_types)  # type: ignore[union-attr]
    if isinstance(info, mi.DictType):
        return _holds_untyped(info.value_type, seen)
    if isinstance(info, mi.UnionType):
        return any(_holds_untyped(t, seen) for t in info.types)
    return False


def _recursive(info: mi.Type, stack: frozenset[type]) -> bool:
    """Whether a msgspec type tree refers back to a Struct it is inside of."""
    if isinstance(info, mi.Metadata):
        return _recursive(info.type, stack)
    if isinstance(info, mi.StructType):
        if info.cls in stack:
            return True
        inner = stack | {info.cls}
        return any(_recursive(f.type, inner) for f in info.fields)
    if isinstance(info, mi.UnionType):
        return any(_recursive(t, stack) for t in info.types)
    if isinstance(info, mi.TupleType):
        return any(_recursive(t, stack) for t in info.item_types)
    for attr in ("item_type", "value_type"):
        inner_type = getattr(info, attr, None)
        if isinstance(inner_type, mi.Type):
            return _recursive(inner_type, stack)
    return False


def _untyped_fields(payload: type[msgspec.Struct]) -> tuple[str, ...]:
    info = mi.type_info(payload)
    assert isinstance(info, mi.StructType)  # narrowing: payload is a Struct
    return tuple(f.name for f in info.fields if _holds_untyped(f.type, {id(payload)}))


@functools.cache
def _payload_facts(payload: type[msgspec.Struct]) -> tuple[tuple[str, ...], int]:
    """What a registry needs to know of a payload class: its untyped fields, and the
    line depth past which a line of it is decoded with care. Worked out once per class
    (``msgspec.inspect`` walks the whole type tree: most of a store's start-up cost when
    it was done for every registry, and a process may open many stores)."""
    deep = (2 * (MAX_JSON_DEPTH + 1) if _recursive(mi.type_info(payload), frozenset())
            else sys.maxsize)
    return _untyped_fields(payload), deep


@final
class EventRegistry:
    """The frozen set of known event types. Iterates in sorted type order."""

    __slots__ = ("_by_type", "_line_decoder", "_list_decoder", "_lookup", "_members",
                 "_projections", "_raw_types", "_surface_types")

    def __init__(
        self,
        entries: Iterable[tuple[str, EventSpec]],
        members: Iterable[tuple[str, UnionMember]] = (),
        projections: Iterable[tuple[str, object]] = (),
    ) -> None:
        """:param entries: ``(plugin, spec)`` for every declared event type.
        :param members: ``(plugin, member)`` for every declared member of a
            merge-extensible union (:mod:`dsh_session_core._schema.unions`).
        :param projections: ``(plugin, projection)`` for every declared projection
            (:mod:`dsh_session_core._schema.projections`).
        :raises DuplicateEventTypeError: a type is declared twice.
        :raises DuplicateUnionMemberError: a union member is declared twice.
        :raises PluginError: an entry is malformed or has no doc line.
        """
        self._members = UnionMembers(members)
        self._projections = check_projections(projections)
        by_type: dict[str, RegisteredEvent] = {}
        undocumented: list[str] = []
        for plugin, spec in entries:
            cls = spec.event
            if not (isinstance(cls, type) and issubclass(cls, Event)) or cls is OpaqueEvent:
                msg = f"plugin {plugin!r} registered {cls!r}, which is not an Event subclass"
                raise PluginError(msg)
            etype = _event_type_of(cls)
            _bind_type(cls, etype)
            if etype in by_type:
                raise DuplicateEventTypeError(etype, (by_type[etype].plugin, plugin))
            doc = spec.doc or _first_paragraph(cls.__doc__)
            if not doc:
                undocumented.append(f"{etype!r} (plugin {plugin!r})")
            payload = _payload_of(cls)
            untyped, deep = _payload_facts(payload)
            by_type[etype] = RegisteredEvent(
                type=etype,
                event=cls,
                payload=payload,
                surface=issubclass(cls, SurfaceEvent),
                doc=doc,
                plugin=plugin,
                untyped_fields=untyped,
                deep_line=deep,
                raw=spec.raw is True,
            )
        # A plain dict for the append path (a mapping proxy's get costs a call more).
        self._lookup: dict[str, RegisteredEvent] = dict(sorted(by_type.items()))
        self._by_type = MappingProxyType(self._lookup)
        if undocumented:
            # All at once, as the catalog generator reports them: fix them in one go.
            msg = (
                f"{len(undocumented)} event type(s) without a doc line (the catalog needs "
                f"one; give the event class a docstring or pass EventSpec(doc=...)): "
                + ", ".join(undocumented)
            )
            raise PluginError(msg)
        self._surface_types = frozenset(t for t, r in by_type.items() if r.surface)
        self._raw_types = frozenset(t for t, r in by_type.items() if r.raw)
        classes: tuple[type[Event], ...] = tuple(r.event for r in by_type.values())
        union: Any = Union[classes] if classes else OpaqueEvent  # noqa: UP007  # runtime tuple
        self._line_decoder = msgspec.json.Decoder(union)
        self._list_decoder = msgspec.json.Decoder(list[union])

    # --- the read-only mapping face -----------------------------------------------------

    def __contains__(self, event_type: object) -> bool:
        return event_type in self._by_type

    def __iter__(self) -> Iterator[RegisteredEvent]:
        return iter(self._by_type.values())

    def __len__(self) -> int:
        return len(self._by_type)

    def get(self, event_type: str) -> RegisteredEvent | None:
        """The entry for ``event_type``, or ``None`` when no plugin declared it."""
        return self._by_type.get(event_type)

    def plugin_for(self, event_type: str) -> str | None:
        """The plugin that declared ``event_type``, or ``None``."""
        entry = self._by_type.get(event_type)
        return entry.plugin if entry is not None else None

    @property
    def members(self) -> UnionMembers:
        """Every member of the merge-extensible unions, core's and the plugins', with
        its owner."""
        return self._members

    @property
    def projections(self) -> tuple[Projection, ...]:
        """The projections the plugins declare, in name order."""
        return self._projections

    @property
    def types(self) -> tuple[str, ...]:
        """Every registered type string, sorted."""
        return tuple(self._by_type)

    @property
    def surface_types(self) -> frozenset[str]:
        """The registered types that produce messages."""
        return self._surface_types

    @property
    def raw_types(self) -> frozenset[str]:
        """The registered types that are raw records of an adapter
        (:attr:`EventSpec.raw`): what ``show`` and the viewer fold away by default."""
        return self._raw_types

    # --- decoding (used by the log reader) ----------------------------------------------

    @property
    def line_decoder(self) -> msgspec.json.Decoder[Any]:
        """Decodes one log line into its typed event (raises on anything untyped)."""
        return self._line_decoder

    @property
    def list_decoder(self) -> msgspec.json.Decoder[Any]:
        """Decodes a JSON array of log entries into typed events, in one C call."""
        return self._list_decoder

    def __repr__(self) -> str:
        return f"<EventRegistry of {len(self)} types>"
