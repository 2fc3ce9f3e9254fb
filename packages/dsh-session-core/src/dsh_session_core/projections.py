"""Projections: keyed rows a plugin folds from the log, kept beside it by the store.

A plugin declares a :class:`Projection` through the ``register_projections`` hook: the
event types it reads and a pure fold from one event to :class:`Put`, :class:`Delete`,
:class:`Clear` and :class:`Summary` changes. Every store keeps the rows current at each
flush where its backend keeps rows (JSONL, SQLite, PostgreSQL, memory; sealed on an
encrypted store), and folds the log for a read where it does not; a read
(``DurableStore.projection``, a :class:`ProjectionView`) never serves a row the log does
not back. docs/projections.md shows a projection whole.
"""

from __future__ import annotations as _annotations

from .lazy import lazy_exports as _lazy_exports

_TYPE_CHECKING = False
if _TYPE_CHECKING:
    from ._persistence.projections.read import ProjectionView
    from ._schema.projections import Change, Clear, Delete, Projection, Put, Summary

_LAZY: dict[str, str] = {
    "Change": ".._schema.projections",
    "Clear": ".._schema.projections",
    "Delete": ".._schema.projections",
    "Projection": ".._schema.projections",
    "ProjectionView": ".._persistence.projections.read",
    "Put": ".._schema.projections",
    "Summary": ".._schema.projections",
}
__all__ = ["Change", "Clear", "Delete", "Projection", "ProjectionView", "Put", "Summary"]
__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-core")
