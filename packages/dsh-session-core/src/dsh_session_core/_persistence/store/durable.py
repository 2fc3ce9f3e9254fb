"""Durable stores: a SessionStore whose sessions are written through a backend.

:class:`DurableStore` is one class made of modules of one concern each: its ground (the
coordinator, the backend's capabilities, the worker thread, closing: :mod:`.store.base`),
its live sessions (here: created, opened, resumed, released, with their asyncio twins),
reading what is stored (:mod:`.store.reads`), removing it (:mod:`.store.retention`) and
forgetting it (:mod:`.store.forgetting`).
Which URL opens which backend is :mod:`.opening` (:func:`~.opening.open_store`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..._model.session import Session
from ..._model.store_args import check_header_args, check_id, check_session
from ..._schema.header import SessionHeader
from ...errors import PersistenceError, SessionExistsError, SessionNotStoredError
from ...events import Event
from ..base import not_found
from .forgetting import StoreForget
from .projections import StoredProjections
from .reads import StoredReads
from .retention import StoreRetention

if TYPE_CHECKING:
    from ..aio import StoredHeaders
    from ..encryption.rekey import Rekeyed

__all__ = ["DurableStore"]

#: How many times :meth:`DurableStore.open_or_create` looks again after another writer
#: changed the id between its look and its act.
_OPEN_OR_CREATE_ATTEMPTS = 5


class DurableStore(StoredReads, StoredProjections, StoreRetention, StoreForget):
    """A :class:`SessionStore` whose sessions are durable.

    Appends are buffered; :meth:`flush` (call it at every ``turn/end``) makes them
    durable. :meth:`open` resumes a stored session, repairing a crash;
    :meth:`open_or_create` resumes it or creates it; :meth:`read_session` reads it
    without writing. :meth:`stored` lists what is stored (what ``dsh-session ls``
    lists), :meth:`~dsh_session_core.SessionStore.live` the sessions live here. Use it
    as a context manager, or call :meth:`close`, to flush what is left and release the
    sessions' writer locks.

    :param backend: where logs live.
    :param plugin_manager: plugins, as for :class:`SessionStore`.
    :param clock: epoch-milliseconds clock.
    """

    def create(
        self,
        id: str | None = None,
        *,
        seed: Iterable[Event | Mapping[str, Any]] | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
        created_at: int | None = None,
        seed_length: int | None = None,
        seed_jsonl: bytes | None = None,
    ) -> Session:
        """:meth:`SessionStore.create`, with the id checked first against the backend's
        id rule (:meth:`~.base.Backend.check_id`), so that an id the backend cannot store
        is refused here, before anything is written or buffered, not at the first flush.

        :raises SessionIdError: the backend cannot store this id (the error states its
            rule).
        :raises SessionExistsError: the id is live here, or stored (``open`` resumes
            it, ``open_or_create`` opens it or creates it).
        :raises TypeError: an argument of the wrong type (the message says what it
            takes).
        """
        check_id("store.create()", id, optional=True)
        check_header_args("store.create()", cwd=cwd, parent_session=parent_session,
                          created_at=created_at, seed_length=seed_length)
        session_id = id if id is not None else self._mint_id()
        self.backend.check_id(session_id)
        self._end_idle(session_id)  # refused as stored, as without the window
        return super().create(
            session_id, seed=seed, cwd=cwd, parent_session=parent_session,
            created_at=created_at, seed_length=seed_length, seed_jsonl=seed_jsonl,
        )

    def open(self, session_id: str, *, resume: Session | None = None) -> Session:
        """Resume a stored session as a live one, to write it: its writer lock is
        taken, its torn tail is cut and an interrupted turn is closed (durably) before
        it is returned (:attr:`~dsh_session_core.Session.created` is ``False``). To read
        it without writing, :meth:`read_session`.

        :param resume: a session of this id that this store released (:meth:`release`)
            and the caller kept: it is taken back without loading the log, reading only
            what was stored after its last event (its writer lock is taken again). When
            no other writer wrote meanwhile, ``resume`` itself is returned, live again;
            when one did, a new session holding ``resume``'s events and theirs (only
            the new lines are read and decoded). When the log no longer continues
            ``resume``'s (cut back, deleted, rewritten) or needs a repair, it is loaded
            whole, as without ``resume``. A session that ``discard`` dropped must not be
            given (it holds events the log does not). Within the idle window of its
            release (:meth:`release`'s ``idle``), ``resume`` is taken back at once: its
            writer lock was kept, nothing is read.
        :raises SessionNotStoredError: nothing is stored under this id.
        :raises SessionLockedError: another writer holds it.
        """
        check_id("store.open()", session_id)
        if resume is not None:
            check_session("store.open(resume=)", resume)
        # Another store object of this process keeping the session in an idle window
        # lets go of it now rather than at the window's end.
        self.persistence.idle.end_elsewhere(session_id)
        if resume is not None and resume.id == session_id and self.get(session_id) is None:
            resumed = self._resume(resume)
            if resumed is not None:
                return resumed
        stored = self.persistence.load(session_id)
        h = stored.header
        # Not self.create: a stored session's id is the backend's already (one stored
        # by another implementation is resumed even if this one would not create it).
        session = self.prepare(
            session_id,
            seed=stored.events,
            seed_jsonl=stored.jsonl,
            cwd=h.cwd if isinstance(h.cwd, str) else None,
            parent_session=h.parent_session if isinstance(h.parent_session, str) else None,
            created_at=h.created_at,  # type: ignore[arg-type]  # a number, as stored
            seed_length=h.seed_length if isinstance(h.seed_length, int) else None,
        )
        session._created = False  # before session_created: plugins may read it
        return self._register(session)

    def _resume(self, previous: Session) -> Session | None:
        """:meth:`open`'s ``resume``: ``None`` when the log must be loaded whole."""
        try:
            found = self.persistence.resume(previous)
        except PersistenceError:
            return None  # a log that does not continue ours: the whole load decides
        if found is None:
            return None
        news, lines = found
        if not news:
            detach: Any = None
            try:
                detach = self.enter(previous)
                self.announce(previous)
            except BaseException:
                if detach is not None:
                    detach()
                self.persistence.discard(previous)
                raise
            if self._scopes:
                self._scopes[-1].append(detach)
            return previous
        h = previous.header
        session = self.prepare(
            previous.id,
            seed=[*previous.events, *news],
            seed_jsonl=previous.jsonl() + b"\n".join(lines) + b"\n",
            cwd=h.cwd if isinstance(h.cwd, str) else None,
            parent_session=h.parent_session if isinstance(h.parent_session, str) else None,
            created_at=h.created_at,  # type: ignore[arg-type]  # a number, as stored
            seed_length=h.seed_length if isinstance(h.seed_length, int) else None,
        )
        session._created = False
        return self._register(session)

    def discard(self, session: Session) -> None:
        """Drop a live session without writing what it has not flushed: its buffered
        events are never written (not by a later flush, nor by :meth:`close`), its
        writer lock is released and it leaves the store. What a caller does when an
        operation fails half way, so that the stored log stays as the operation found
        it; the session object holds events the log does not, so it is not used again:
        :meth:`open` the session anew."""
        check_session("store.discard()", session)
        self.persistence.discard(session)
        self.detach(session)

    def open_or_create(
        self,
        id: str,
        *,
        seed: Iterable[Event | Mapping[str, Any]] | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
        created_at: int | None = None,
        seed_length: int | None = None,
        seed_jsonl: bytes | None = None,
    ) -> Session:
        """The session ``id``: the stored one resumed (as :meth:`open` resumes it), else a
        new one (as :meth:`create` makes it, with these options, which an existing
        session ignores); one live here already is returned as it is. Whether it was
        made now is its :attr:`~dsh_session_core.Session.created`.

        Safe when several processes call it for one new id at once: one of them creates
        the session, the others open it (or, while the creator still holds it, get
        :class:`SessionLockedError`, as :meth:`open` would); never two sessions, never a
        session that fails at its first flush because another one took the id.

        :raises SessionLockedError: another writer holds the session.
        :raises SessionIdError: a new id the backend cannot store.
        :raises PersistenceError: a stored log that cannot be resumed (another format
            version, corruption: see :meth:`open`).
        """
        check_id("store.open_or_create()", id)
        check_header_args("store.open_or_create()", cwd=cwd, parent_session=parent_session,
                          created_at=created_at, seed_length=seed_length)
        live = self.get(id)
        if live is not None:
            return live
        last: Exception | None = None
        # Each retry follows another writer's create (or delete) that landed between our
        # look and our act: a few are plenty; a loop of them is someone deleting and
        # recreating the id as fast as we look, and its error is raised.
        for _ in range(_OPEN_OR_CREATE_ATTEMPTS):
            try:
                return self.open(id)
            except SessionNotStoredError as exc:
                if exc.session_id != id:
                    raise
                last = exc
            try:
                return self.create(
                    id, seed=seed, cwd=cwd, parent_session=parent_session,
                    created_at=created_at, seed_length=seed_length, seed_jsonl=seed_jsonl,
                )
            except SessionExistsError as exc:  # stored by another writer meanwhile
                last = exc
            except PersistenceError as exc:  # create's look found it stored meanwhile
                if type(exc) is not PersistenceError or not self._is_stored(id):
                    raise
                last = exc
        assert last is not None
        raise last

    def _is_stored(self, session_id: str) -> bool:
        return self.backend.tail_lines(session_id, 0) is not None

    def read_session(self, session_id: str) -> Session:
        """A stored session, read-only: its events, derived messages and the providers'
        converters work as on any :class:`~dsh_session_core.Session`, and it can be
        forked (:meth:`fork`); every append, and the builders ``turn`` and ``inject``,
        is refused with :class:`~dsh_session_core.errors.ReadOnlySessionError` (open it
        with :meth:`open` to write).

        It is what is stored now: a live session's appends once flushed (one live in
        this store gives its flushed events, without reading the backend). Nothing is
        written and no writer lock is taken, so a session another process is writing
        can be read; a torn last line is left out, and a turn a crash interrupted is
        read as it is stored, open (:meth:`open` would close it). Flushing or releasing
        it does nothing.

        :raises SessionNotStoredError: nothing is stored under this id.
        :raises PersistenceError: a log of another format version.
        :raises LogFormatError: a stored line is corrupt (not a torn last line).
        """
        from ..._model.readonly import ReadOnlySession

        check_id("store.read_session()", session_id)
        live = self.get(session_id)
        count = self.persistence.stored_count(live) if live is not None else None
        if live is not None and count is not None:
            if count == 0:  # a session is stored from its first flushed event on
                raise not_found(session_id)
            header = live.header
            events: Any = live.events[:count]
            jsonl: bytes | None = live.jsonl(0, count)
        else:
            with self.persistence.serialized(session_id):
                stored = self.backend.load_stored(session_id, self.registry)
            if stored is None:
                raise not_found(session_id)
            header, events, jsonl = stored.header, stored.events, stored.jsonl
        self.persistence.check_version(header)
        session = ReadOnlySession(
            session_id, events, header, registry=self.registry, clock=self._clock,
            seed_jsonl=jsonl, strict=self._strict, foreign_types=self._foreign,
        )
        session._created = False
        return session

    # --- asyncio twins (see .base) -----------------------------------------------------

    async def acreate(
        self,
        id: str | None = None,
        *,
        seed: Iterable[Event | Mapping[str, Any]] | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
        created_at: int | None = None,
        seed_length: int | None = None,
        seed_jsonl: bytes | None = None,
    ) -> Session:
        """:meth:`create` for asyncio hosts, in the store's worker thread on every
        backend: creating checks that nothing is stored under the id and takes the
        session's writer lock (on PostgreSQL a lease: a synchronous connection of its
        own, which the session's synchronous flushes then write through)."""
        return await self._worker().run(
            self.create, id, seed=seed, cwd=cwd, parent_session=parent_session,
            created_at=created_at, seed_length=seed_length, seed_jsonl=seed_jsonl,
        )

    async def aopen(self, session_id: str, *, resume: Session | None = None) -> Session:
        """:meth:`open` for asyncio hosts, in the store's worker thread on every backend:
        the crash repair and the writer lock (the PostgreSQL lease) are synchronous, and
        decoding a long log is CPU work that must not run on the event loop.

        :raises SessionNotStoredError: nothing is stored under this id.
        """
        return await self._worker().run(self.open, session_id, resume=resume)

    async def adiscard(self, session: Session) -> None:
        """:meth:`discard` for asyncio hosts, in the store's worker thread (releasing a
        writer lock may be a round trip: PostgreSQL)."""
        await self._worker().run(self.discard, session)

    async def aopen_or_create(
        self,
        id: str,
        *,
        seed: Iterable[Event | Mapping[str, Any]] | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
        created_at: int | None = None,
        seed_length: int | None = None,
        seed_jsonl: bytes | None = None,
    ) -> Session:
        """:meth:`open_or_create` for asyncio hosts, in the store's worker thread (as
        :meth:`aopen` and :meth:`acreate` run).

        :raises SessionLockedError: another writer holds the session.
        """
        return await self._worker().run(
            self.open_or_create, id, seed=seed, cwd=cwd, parent_session=parent_session,
            created_at=created_at, seed_length=seed_length, seed_jsonl=seed_jsonl,
        )

    async def aread_session(self, session_id: str) -> Session:
        """:meth:`read_session` for asyncio hosts, in the store's worker thread
        (decoding a long log is CPU work that must not run on the event loop).

        :raises SessionNotStoredError: nothing is stored under this id.
        """
        return await self._worker().run(self.read_session, session_id)

    async def afork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_id: str | None = None,
    ) -> Session:
        """:meth:`fork` for asyncio hosts, in the store's worker thread (the child is
        created as :meth:`acreate` creates).

        :raises SessionForkError: as :meth:`fork`.
        """
        return await self._worker().run(self.fork, source, boundary, child_id)

    async def aflush(self, session: Session) -> None:
        """Flush from asyncio: the durable write is awaited natively where the backend
        can (PostgreSQL on psycopg's ``AsyncConnection``, Redis on redis-py's asyncio
        client), else in a worker thread; then
        every other ``session_flush`` implementation runs, as :meth:`SessionStore.aflush`
        runs them. It does not queue behind the store's other awaited operations:
        flushes of different sessions run at once, each session's one at a time."""
        check_session("store.aflush()", session)
        await self.persistence.aflush(session)
        impls = self.plugin_manager.hook.session_flush.get_hookimpls()
        if len(impls) == 1 and impls[0].plugin is self.persistence:
            return  # the usual store: no other implementation to run (and no hop for it)
        await super().aflush(session)  # the persistence hook finds nothing left to write

    async def arelease(self, session: Session, *, idle: float = 0.0) -> None:
        """:meth:`release` for asyncio hosts: the flush as :meth:`aflush` does it, then
        the writer lock is released in the store's worker thread (with ``idle``, kept
        for the window on the event loop: that is no I/O)."""
        check_session("store.arelease()", session)
        await self.persistence.aflush(session)
        if idle > 0 and self.persistence.linger(session, idle):
            self.detach(session)
            return
        await self._worker().run(self.release, session)

    async def aend_idle(self, session: Session) -> None:
        """:meth:`end_idle` for asyncio hosts, in the store's worker thread (releasing a
        writer lock may be a round trip: PostgreSQL)."""
        await self._worker().run(self.end_idle, session)

    def astored(self) -> StoredHeaders:
        """:meth:`stored` for asyncio hosts: ``await store.astored()`` for the list, or
        ``async for header in store.astored()``. Listed natively on PostgreSQL (one
        query on psycopg's ``AsyncConnection``) and Redis (redis-py's asyncio client),
        else in the store's worker thread."""
        from ..aio import StoredHeaders

        return StoredHeaders(self._astored)

    async def _astored(self) -> list[SessionHeader]:
        native = self.capabilities.async_list
        if native is not None:
            return await native.alist()
        return await self._worker().run(self.stored)

    async def aappend_stored(
        self, session_id: str, events: Iterable[Event | Mapping[str, Any]]
    ) -> None:
        """:meth:`append_stored` for asyncio hosts, in the store's worker thread (the
        stored session is adopted: loaded, repaired and locked)."""
        await self._worker().run(self.append_stored, session_id, events)

    async def alocation(self, session_id: str) -> str:
        """:meth:`location` for asyncio hosts, in the store's worker thread (a session
        not live here is looked for in the stored ones)."""
        return await self._worker().run(self.location, session_id)

    def release(self, session: Session, *, idle: float = 0.0) -> None:
        """Flush ``session`` and hand it back: it leaves the store and its writer lock is
        released, so another process may open and write it.

        :param idle: an idle window, in seconds: the session is flushed and leaves the
            store all the same, but its writer lock is kept that long, so that
            ``open(id, resume=session)`` within the window takes it back at once (no
            lock to take, nothing to read). Once the window passes without that, the
            lock is released by a timer thread of this store; at once by
            :meth:`end_idle`, :meth:`close`, an ``open`` of the id without this
            ``resume``, a ``create``, ``delete`` or ``rekey`` of it, by this store or
            another store object of this process over the same store; with the
            process.
            Meanwhile another process's writer finds the session locked (and waits for
            it, as for any writer, within its lock timeout): keep the window far below
            that timeout. ``0``: released at once.
        """
        check_session("store.release()", session)
        self.persistence.release(session, idle)
        self.detach(session)

    def end_idle(self, session: Session) -> None:
        """End the idle window of a session released with one (:meth:`release`'s
        ``idle``): its writer lock is released now. Nothing when it has none (taken
        back, ended, never opened)."""
        check_session("store.end_idle()", session)
        self.persistence.end_idle(session.id, session)

    def _end_idle(self, session_id: str) -> None:
        """End the idle window of whichever session of ``session_id`` has one, in this
        store or in another store object of this process over the same store."""
        self.persistence.idle.end_elsewhere(session_id)
        self.persistence.end_idle(session_id)

    def rekey(self, session_id: str) -> Rekeyed:
        """Reseal a stored session's records under this encrypted store's current key,
        atomically, under its writer lock (:func:`~.encryption.rekey.rekey`; docs/encryption.md).

        :raises EncryptionError: the store was opened without keys, or its backend
            cannot rewrite a session; or what opening the session raises.
        """
        from ..encryption.rekey import rekey

        check_id("store.rekey()", session_id)
        self._end_idle(session_id)  # rekeyed under the lock it takes
        return rekey(self, session_id)

    def location(self, session_id: str) -> str:
        """Where a session's log lives: its JSONL file, or the SQLite database.

        :raises SessionNotStoredError: no session with this id is live here or stored.
        """
        live = self.get(session_id)
        if live is not None:
            return self.backend.location(live.header)
        for header in self.stored():
            if header.id == session_id:
                return self.backend.location(header)
        raise not_found(session_id)

    def stored(self) -> list[SessionHeader]:
        """The headers of every stored session, live here or not: what ``dsh-session
        ls`` lists. The sessions live in this store (objects) are :meth:`live`."""
        return self.persistence.list()

    def append_stored(
        self, session_id: str, events: Iterable[Event | Mapping[str, Any]]
    ) -> None:
        """Durably append events to a stored session that is not live here."""
        self.persistence.append(session_id, events)
