"""What a projection is: a plugin's declaration of keyed rows folded from some events.

A projection is a read model kept beside the log (a table of rows per session, and one
summary row per session), so that a reader asks for a row by key, a key range or the
newest rows and pays for what it gets, not for folding the log. The log stays the only
truth: rows are derived by :attr:`Projection.fold`, a pure function of one event, and
can be dropped and rebuilt at any time (``dsh-session reindex``).

A plugin declares its projections through the ``register_projections`` hook; the store
keeps each one current when it flushes a session (``_persistence/projections/``), and
answers reads from the rows where the backend keeps them, from a fold of the log where
it does not.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeAlias

import msgspec

from ..errors import PluginError
from ..events import Event

__all__ = [
    "Change",
    "Clear",
    "Delete",
    "Projection",
    "Put",
    "Summary",
    "check_projections",
]

#: A JSON array's values, each as its bytes (where a joined array's rows begin and end).
_RAWS: Final = msgspec.json.Decoder(list[msgspec.Raw])


class Put(msgspec.Struct, frozen=True, gc=False):
    """Set the row under ``key`` to ``row``. A key is text every backend stores (no NUL,
    no lone surrogate); rows sort by its code points, so a fold writes numbers
    zero-padded when their order matters."""

    key: str
    row: msgspec.Struct


class Delete(msgspec.Struct, frozen=True, gc=False):
    """Remove the row under ``key`` (nothing when there is none)."""

    key: str


class Clear(msgspec.Struct, frozen=True, gc=False):
    """Remove every row of the projection in this session (not its summary)."""


class Summary(msgspec.Struct, frozen=True, gc=False):
    """Set the session's one summary row (``None``: remove it), what a listing across
    sessions reads without opening their logs."""

    row: msgspec.Struct | None


#: One change a fold makes to a session's rows.
Change: TypeAlias = Put | Delete | Clear | Summary

_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)+")


@dataclasses.dataclass(frozen=True, slots=True)
class Projection:
    """A projection a plugin declares (``register_projections``).

    :ivar name: its name, namespaced like event types (``"agents/items"``).
    :ivar version: bumped whenever :attr:`fold` or :attr:`row` changes: rows kept
        under another version are never read, they are rebuilt from the log.
    :ivar types: the event types it reads; every other event leaves its rows as they
        are (and is never decoded for it).
    :ivar row: the rows' type (a msgspec Struct), how they are stored and read back.
    :ivar fold: the changes one event makes to the session's rows, in order. A pure
        function of the event: the same event always makes the same changes, whoever
        folds it, whenever.
    :ivar summary: the summary row's type, when the fold writes one (:class:`Summary`).
    :ivar doc: one line saying what it holds, for people.

    Keys are part of what a store shows without keys: on an encrypted store the rows
    and the summary are sealed, the keys are not. A key holds only what an event's
    envelope shows in the clear anyway (ids, seqs, counters), never content.
    """

    name: str
    version: int
    types: frozenset[str]
    row: type[msgspec.Struct]
    fold: Callable[[Event], Iterable[Change]]
    summary: type[msgspec.Struct] | None = None
    doc: str = ""
    _codecs: tuple[Any, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", frozenset(self.types))
        try:
            decoders = (msgspec.json.Decoder(self.row),
                        msgspec.json.Decoder(self.summary) if self.summary else None,
                        msgspec.json.Decoder(list[self.row]))  # type: ignore[name-defined]
        except TypeError:  # not a type msgspec decodes: check_projections says so
            return
        object.__setattr__(self, "_codecs", decoders)

    def decode_row(self, data: bytes) -> Any:
        """A stored row back as :attr:`row`."""
        return self._codecs[0].decode(data)

    def decode_rows(self, rows: Sequence[bytes]) -> list[Any]:
        """Stored rows back as :attr:`row`, in one decode: comma-joined in brackets,
        they are one JSON array, decoded in one call rather than one call a row. Rows
        that would make other values together than alone (halves of one, two in one)
        are caught: the array's values must span exactly the rows' lengths, else each
        row is decoded alone, and the one that does not decode raises as it would."""
        if len(rows) < 2:
            return [self._codecs[0].decode(row) for row in rows]
        joined = b"[" + b",".join(rows) + b"]"
        try:
            spans = _RAWS.decode(joined)
            if list(map(len, spans)) == list(map(len, rows)):
                decoded: list[Any] = self._codecs[2].decode(joined)
                return decoded
        except msgspec.DecodeError:
            pass
        return [self._codecs[0].decode(row) for row in rows]

    def decode_summary(self, data: bytes) -> Any:
        """A stored summary row back as :attr:`summary`."""
        decoder = self._codecs[1]
        if decoder is None:
            msg = f'projection "{self.name}" declares no summary row'
            raise TypeError(msg)
        return decoder.decode(data)


def check_projections(entries: Iterable[tuple[str, object]]) -> tuple[Projection, ...]:
    """The projections ``(plugin, declared)`` gave, checked; in name order.

    :raises PluginError: an entry is no :class:`Projection`, its name is not a
        namespaced name, its version is no positive int, its row type is no msgspec
        Struct, or two plugins declare one name.
    """
    by_name: dict[str, tuple[str, Projection]] = {}
    for plugin, p in entries:
        problem = _problem(p)
        if problem:
            msg = f"plugin {plugin!r}: register_projections returned {problem}"
            raise PluginError(msg)
        assert isinstance(p, Projection)
        if p.name in by_name:
            other = by_name[p.name][0]
            msg = (f'projection "{p.name}" is declared by two plugins, {other!r} and '
                   f"{plugin!r}: uninstall one of them")
            raise PluginError(msg)
        by_name[p.name] = (plugin, p)
    return tuple(p for _, (_, p) in sorted(by_name.items()))


def _problem(p: object) -> str:
    if not isinstance(p, Projection):
        return f"{p!r}, which is not a Projection"
    if not _NAME.fullmatch(p.name):
        return (f'a projection named {p.name!r}: a name is namespaced like an event type '
                f'("plugin/what": lower-case letters, digits, "_", "." and "-")')
    if isinstance(p.version, bool) or not isinstance(p.version, int) or p.version < 1:
        return f'projection "{p.name}" with version {p.version!r}: a positive int'
    kinds: tuple[object, ...] = (p.row, p.summary)
    for kind in kinds:
        if kind is not None and not (isinstance(kind, type)
                                     and issubclass(kind, msgspec.Struct)):
            return f'projection "{p.name}" with row type {kind!r}: a msgspec Struct'
    fold: object = p.fold
    if not callable(fold):
        return f'projection "{p.name}" whose fold is not callable'
    return ""
