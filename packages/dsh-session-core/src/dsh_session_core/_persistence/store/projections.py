"""The durable store's projections: reading them, and rebuilding them (``reindex``).

The part of :class:`~.durable.DurableStore` that reads a plugin's projection of a stored
session (:meth:`StoredProjections.projection`), the summary rows of many
(:meth:`StoredProjections.projection_summaries`), and rebuilds a store's rows from its
logs (:meth:`StoredProjections.reindex`). How rows are kept at each flush is the write
path's (``projections/keep.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..base import not_found
from .base import StoreBase

if TYPE_CHECKING:
    from ..._schema.projections import Projection
    from ..projections.read import ProjectionView

__all__ = ["StoredProjections"]


class StoredProjections(StoreBase):
    """The projection part of :class:`~.durable.DurableStore` (see the module)."""

    def projection(self, session_id: str, name: str) -> ProjectionView[Any]:
        """The rows of projection ``name`` (a plugin's, ``register_projections``) of a
        stored session, as stored now: read by key (``get``), key range or newest first
        (``rows``), and its summary row (``summary``). Where the backend keeps rows
        (every built-in one) a read costs what it returns; elsewhere the log is folded.
        Nothing is written, no lock is taken.

        :raises UnknownProjectionError: no installed plugin declares ``name``.
        :raises SessionNotStoredError: nothing is stored under this id.
        """
        from ..projections.read import open_view

        view = open_view(self.capabilities, self.registry, self._projection(name),
                         session_id)
        if view is None:
            raise not_found(session_id)
        return view

    def projection_summaries(self, name: str, session_ids: Iterable[str] | None = None
                             ) -> dict[str, Any]:
        """The summary row of projection ``name`` of each stored session that has one
        (of ``session_ids`` only, when given), by session id: what a listing across
        sessions reads without opening their logs.

        :raises UnknownProjectionError: no installed plugin declares ``name``.
        """
        from ..projections.read import summaries

        projection = self._projection(name)
        ids = ([h.id for h in self.backend.list()] if session_ids is None
               else list(session_ids))
        return summaries(self.capabilities, self.registry, projection, ids)

    def _projection(self, name: str) -> Projection:
        for p in self.registry.projections:
            if p.name == name:
                return p
        from ...errors import UnknownProjectionError

        raise UnknownProjectionError(name, tuple(p.name for p in self.registry.projections))

    async def aprojection(self, session_id: str, name: str) -> ProjectionView[Any]:
        """:meth:`projection` for asyncio hosts, in the store's worker thread (the view's
        reads then run where they are called: each is one short backend call)."""
        return await self._worker().run(self.projection, session_id, name)

    async def aprojection_summaries(self, name: str,
                                    session_ids: Iterable[str] | None = None
                                    ) -> dict[str, Any]:
        """:meth:`projection_summaries` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.projection_summaries, name, session_ids)

    def reindex(self, session_ids: Iterable[str] | None = None
                ) -> dict[str, tuple[str, ...] | None]:
        """Rebuild the projection rows of the stored sessions (``session_ids`` only,
        when given) from their logs, each under its writer lock: the rows a backend
        keeps are dropped and folded anew (after a plugin's fold changed without a new
        version, or to make a store's rows current at once rather than at each
        session's next write). By session id, the projections rebuilt, or ``None`` for
        a session a writer holds (left as it is: run it again later).

        :raises SessionNotStoredError: a named session is not stored.
        :raises PluginError: a projection's fold failed.
        """
        from ...errors import SessionLockedError
        from ..projections.rebuild import rebuild_rows

        ids = ([h.id for h in self.backend.list()] if session_ids is None
               else list(dict.fromkeys(session_ids)))
        done: dict[str, tuple[str, ...] | None] = {}
        for sid in ids:
            if self.get(sid) is not None:  # this store's live session: its writer's
                done[sid] = None
                continue
            stored = self.backend.load_stored(sid, self.registry)
            if stored is None:
                raise not_found(sid)
            try:
                lock = self.backend.acquire(stored.header)
            except SessionLockedError:
                done[sid] = None
                continue
            try:
                again = self.backend.load_stored(sid, self.registry)  # as it is, locked
                if again is None:
                    continue
                done[sid] = rebuild_rows(self.capabilities, self.registry, again.header,
                                         again.events)
            finally:
                lock.release()
        return done
