"""Rebuilding a session's projection rows from its log: ``reindex``, rekey and copy.

Under the session's writer lock, every projection whose events the log holds (or whose
rows the backend keeps) is folded from the log's start and its rows replaced at once
(:meth:`~..capabilities.Projecting.write_rows`): what ``dsh-session reindex`` does for a
store, what a rekey does after it reseals a session (its rows are sealed anew), what a
copy does for each session it writes into a store that keeps rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._schema.header import SessionHeader
from ..._schema.registry import EventRegistry
from ...events import Event
from ..capabilities import Capabilities
from ..rows import RowChanges
from .fold import fold_changes, mark_after

__all__ = ["rebuild_rows"]


def rebuild_rows(caps: Capabilities, registry: EventRegistry, header: SessionHeader,
                 events: Sequence[Event]) -> tuple[str, ...]:
    """Replace the rows of every projection of ``registry`` that reads one of
    ``events`` (the session's whole log) or keeps rows in the session, folded anew; the
    caller holds the session's writer lock. The names of the projections rebuilt (none
    where the backend keeps no rows).

    :raises PluginError: a projection's fold failed (its rows are left as they were).
    """
    rows = caps.projecting
    if rows is None or not registry.projections:
        return ()
    kept = rows.projection_marks(header.id)
    present = {e.type for e in events}
    last = events[-1] if events else None
    changes: list[RowChanges] = []
    for p in registry.projections:
        if p.name in kept or not present.isdisjoint(p.types):
            changes.append(fold_changes(p, events, mark_after(p, last), rebuild=True))
    if changes:
        rows.write_rows(header, changes)
    return tuple(c.name for c in changes)
