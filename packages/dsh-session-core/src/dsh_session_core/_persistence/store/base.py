"""The ground of a durable store: its coordinator, backend, capabilities, worker, closing.

:class:`~.durable.DurableStore` is made of it and of the modules beside it: the
coordinator a store writes through, its backend and that backend's capabilities, the
worker thread its awaited operations run in, and closing.

A durable store is one class split by concern: this base; its sessions, opened,
created, resumed and released (:mod:`.durable`); reading what is stored, in part and by
search (:mod:`.store.reads`); and deleting and retention (:mod:`.store.retention`).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Self

from ..._base.closing import ClosesOnExit
from ..._model.session import Clock
from ..._model.store import SessionStore
from ..._plugins.manager import PluginManager, create_plugin_manager
from ..base import Backend
from ..capabilities import Capabilities
from .coordinator import PersistencePlugin

if TYPE_CHECKING:
    # Imported on first use: asyncio and concurrent.futures are for asyncio hosts only
    # (`dsh-session --help` and the synchronous API must not pay for them).
    from ..aio import StoreWorker

__all__ = ["StoreBase"]

#: Guards the making of a store's worker thread (:meth:`StoreBase._worker`).
_WORKER_GUARD = threading.Lock()


class StoreBase(SessionStore, ClosesOnExit):
    """What every part of a durable store stands on (see the module's docstring); a
    store is made as :class:`~.durable.DurableStore`.

    :param backend: where logs live.
    :param plugin_manager: plugins, as for :class:`~dsh_session_core.SessionStore`.
    :param clock: epoch-milliseconds clock.
    """

    def __init__(
        self,
        backend: Backend,
        plugin_manager: PluginManager | None = None,
        *,
        clock: Clock | None = None,
        strict: bool = True,
        foreign_types: Iterable[str] = (),
        checks: bool = False,
    ) -> None:
        """:param backend: where the sessions are stored.
        :param strict, foreign_types, checks: what appends refuse, as for
            :class:`~dsh_session_core.SessionStore`.
        """
        pm = plugin_manager if plugin_manager is not None else create_plugin_manager()
        super().__init__(pm, clock=clock, strict=strict, foreign_types=foreign_types,
                         checks=checks)
        self.persistence = PersistencePlugin(backend, self.registry)
        pm.register(self.persistence, name="persistence")

    @property
    def backend(self) -> Backend:
        """The backend this store writes through."""
        return self.persistence.backend

    @property
    def capabilities(self) -> Capabilities:
        """What the backend has beyond the :class:`~.base.Backend` protocol (a native
        search, deletion, asyncio twins...): found once, when this store was made."""
        return self.persistence.capabilities

    def _mint_id(self) -> str:
        # UUIDs: session-<n> would collide with the sessions of earlier processes.
        return str(uuid.uuid4())

    # --- asyncio ------------------------------------------------------------------------
    #
    # Each a* operation of a durable store is its synchronous twin, awaited without
    # blocking the event loop (see .aio for the rule of what may run at once): natively
    # where the backend has an async capability for it, else in the store's worker
    # thread, where the operations run one at a time. Each twin is written in the
    # module of its synchronous form.

    #: The store's worker thread (:class:`~.aio.StoreWorker`), made at first use: a
    #: class default, since ``__init__`` need not know about asyncio.
    _aio_worker: StoreWorker | None = None

    def _worker(self) -> StoreWorker:
        worker = self._aio_worker
        if worker is None:
            from ..aio import StoreWorker

            with _WORKER_GUARD:  # two threads' first awaited operations: one worker
                worker = self._aio_worker
                if worker is None:
                    worker = self._aio_worker = StoreWorker()
        return worker

    def close(self) -> None:
        """Flush every session, release the writer locks, close the backend."""
        try:
            self.persistence.close()
        finally:
            self._stop_worker()

    async def aclose(self) -> None:
        """:meth:`close` for asyncio hosts: the final flushes and the lock releases run
        in the store's worker thread, after the awaited operations queued before; the
        backend is closed natively when it can (PostgreSQL and Redis close their
        asyncio connections politely), else in that thread.

        :raises ExceptionGroup: ``<backend name> dispose failed``, with every failure.
        """
        persistence = self.persistence
        try:
            if persistence.closed:
                return
            worker = self._worker()
            errors = await worker.run(persistence.close_sessions)
            native = self.capabilities.async_close
            try:
                if native is not None:
                    await native.aclose()
                else:
                    await worker.run(self.backend.close)
            except Exception as exc:
                errors.append(exc)
            persistence.raise_dispose(errors)
        finally:
            self._stop_worker()

    def _stop_worker(self) -> None:
        worker = self._aio_worker
        if worker is not None:
            worker.shutdown()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
