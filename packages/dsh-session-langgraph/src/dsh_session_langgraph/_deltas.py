"""Which list values are stored as deltas, and on which base: a channel's chain of
values from its last full value, its :class:`Tail`.

A list channel's new value that extends its previous one (the ``messages`` list under
``add_messages`` grows by a message or two a step) is stored as a delta: the elements
it adds to an earlier value of its chain, and that value's version (``TypedBlob.base``).
Otherwise a conversation's log would hold its whole list again at every step, growing
with the square of its length, as the peers' tables do.

Which earlier value is a skip-delta's choice (as Subversion's): the delta at place ``p``
of the chain (``TypedBlob.position``, the full value being place 0) extends the value at
place ``p - u``, ``u`` the unit of ``p``'s lowest non-zero digit in base :data:`RADIX`
(in base 2, ``p`` with its lowest set bit cleared). A read then joins the full value and
one delta per unit of ``p``'s digits: with ``b`` the radix, at most ``(b - 1) logb(p) +
1`` pieces, while each element is stored in about ``(b - 1) / b logb(p)`` deltas: the
log grows as ``n log n``, not ``n^2``. A chain that would make a read join more than
:data:`PIECES` pieces starts again with a full value.

Which elements are new is told without serializing the old ones: the saver keeps the
last value it stored or read of each list channel, and the new value extends it when it
starts with the very same objects (``is``; equal ``str``, ``bytes``, ``int``, ``bool``
or ``None`` also do, whose equality is their serialization's). A value mutated in place
after it was stored is not seen as changed, as LangGraph does not see it either (its
channels are updated by the values nodes return).
"""

from __future__ import annotations

__all__ = ["PIECES", "RADIX", "Tail", "extends", "full_tail", "read_tail"]

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .events import TypedBlob

#: The base of the places' digits, and at most how many pieces a read of a list
#: channel's value joins (its full value and up to ``PIECES - 1`` deltas): chosen by
#: measurement (docs/decisions.md, issue 39).
RADIX = 8
PIECES = 32

#: The types whose equal values serialize alike (``1 == 1.0 == True`` do not).
_PLAIN = frozenset({str, bytes, int, bool, type(None)})

#: A place of a chain a later delta may extend: (position, version, element count).
Place = tuple[int, Any, int]


def _below(position: int) -> int:
    """The place the delta at ``position`` (> 0) extends (see the module's docstring)."""
    unit = 1
    while position % (unit * RADIX) == 0:
        unit *= RADIX
    return position - unit


def extends(new: list[Any], old: Sequence[Any]) -> bool:
    """Whether ``new`` starts with ``old``'s elements (see the module's docstring)."""
    if len(new) < len(old):
        return False
    if all(map(operator.is_, old, new)):  # the usual case, in C
        return True
    return all(a is b or (a.__class__ is b.__class__ and a.__class__ in _PLAIN and a == b)
               for a, b in zip(old, new, strict=False))


@dataclass(frozen=True)
class Tail:
    """The last value of a list channel the saver stored or read: the blob holding it
    (the index's own object: the next value extends it only if its parent's blob of the
    channel is this one), its elements (the very objects, compared by identity), and the
    places of its chain a later delta may extend (the full value's first, then each
    delta's a read of this value joins, ending with this one's)."""

    blob: TypedBlob
    elements: tuple[Any, ...]
    path: tuple[Place, ...]

    def plan(self, value: list[Any]) -> tuple[Place, int] | None:
        """For ``value``, the next value of the chain: the place its delta extends and
        its own position; ``None`` when it is stored in full (it does not extend this
        one, or a read would join more than :data:`PIECES` pieces)."""
        if not extends(value, self.elements):
            return None
        position = self.path[-1][0] + 1
        target = _below(position)
        for depth, place in enumerate(self.path):
            if place[0] == target:
                return (place, position) if depth + 2 <= PIECES else None
        return None

    def then(self, blob: TypedBlob, value: list[Any]) -> Tail:
        """The tail after ``blob`` stored ``value``: as a delta on a place of this one's
        chain, or in full."""
        if blob.base is None:
            return full_tail(blob, value)
        kept = tuple(p for p in self.path if p[0] <= _below(blob.position))
        return Tail(blob, tuple(value), (*kept, (blob.position, blob.version, len(value))))


def full_tail(blob: TypedBlob, value: list[Any]) -> Tail:
    return Tail(blob, tuple(value), ((0, blob.version, len(value)),))


def read_tail(pieces: Sequence[TypedBlob], counts: Sequence[int], value: list[Any]
              ) -> Tail | None:
    """The tail of ``value``, read from ``pieces`` (head first, as ``ThreadIndex.chain``
    gives them; ``counts`` the elements each holds); ``None`` when their places are not
    the chain's a skip-delta makes (a log edited by hand): its next value is stored in
    full."""
    places: list[Place] = []
    total = 0
    for piece, count in zip(reversed(pieces), reversed(counts), strict=True):
        total += count
        places.append((piece.position, piece.version, total))
    expected = []
    position = pieces[0].position
    while position > 0:
        expected.append(position)
        position = _below(position)
    if [p[0] for p in places] != [0, *reversed(expected)]:
        return None
    return Tail(pieces[0], tuple(value), tuple(places))
