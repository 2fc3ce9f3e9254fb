"""Which sessions a store marks never to be pruned (``retained``).

Which sessions a store marks never to be pruned (``retained``), as the read model
shows them: read from the store's retention ledger (docs/retention.md) through the
``Backend`` protocol, without a lock and without writing, once per listing
(:func:`retained_ids`) or per session read by id (:func:`session_mark`).

A display never fails for the ledger's sake. A record it cannot read (one an earlier
release sealed, read without keys) is left out, as prune's reader counts it (prune then
refuses: it needs every mark; a display shows those it can read). A ledger that does not
read at all (a damaged line, a key that does not open it) leaves the marks unknown: a
listing shows none, and a session read by id says so in its warnings.

The ledger is decoded with core's own types (:func:`~.._plugins.core_plugin.
core_registry`), whatever registry the caller reads sessions with: a caller without
core's plugin would otherwise read every mark as an unknown record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._persistence.base import Backend

__all__ = ["SessionMark", "retained_ids", "session_mark"]


@dataclass(frozen=True, slots=True)
class SessionMark:
    """What the ledger says of one session.

    :ivar retained: it is marked never to be pruned.
    :ivar note: the mark's note as people read it (a sealed one opened with the store's
        keys, or what stands in for it), ``None`` when it has none.
    :ivar problem: why the ledger could not be read (then ``retained`` is false for not
        knowing), else ``None``.
    """

    retained: bool = False
    note: str | None = None
    problem: str | None = None


def retained_ids(backend: Backend) -> frozenset[str]:
    """The ids of the sessions ``backend``'s store marks never to be pruned; none when
    it holds no ledger, or when its ledger does not read (a listing is not stopped for
    it)."""
    from .._persistence.retention.ledger import backend_marks
    from .._plugins.core_plugin import core_registry
    from ..errors import DshSessionError

    try:
        marks = backend_marks(backend, core_registry())
    except (DshSessionError, OSError):
        return frozenset()
    return frozenset(sid for sid, retain in marks.items() if retain)


def session_mark(backend: Backend, session_id: str) -> SessionMark:
    """Whether ``backend``'s store marks ``session_id`` never to be pruned, and its note."""
    from .._persistence.retention.ledger import backend_state, note_of
    from .._plugins.core_plugin import core_registry
    from ..errors import DshSessionError
    from .text import one_line

    try:
        mark = backend_state(backend, core_registry()).marks.get(session_id)
    except (DshSessionError, OSError) as exc:
        return SessionMark(problem=one_line(exc))
    if mark is None or not mark.retain:
        return SessionMark()
    return SessionMark(True, note_of(backend, mark))
