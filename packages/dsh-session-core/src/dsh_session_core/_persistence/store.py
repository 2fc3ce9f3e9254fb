"""Durable stores: a SessionStore whose sessions are written through a backend, and
:func:`open_store`, which picks the backend from a URL (or the embedded default).

The embedded default is the JSONL backend under the user's data folder
(``$XDG_DATA_HOME/dsh-session/sessions``, else ``~/.local/share/dsh-session/sessions``),
overridden by the ``DSH_SESSION_STORE`` environment variable or the ``url`` argument.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import AsyncGenerator, Callable, Collection, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._header import SessionHeader
from .._plugins import PluginManager, create_plugin_manager
from .._session import Clock, Session
from .._store import SessionStore
from ..errors import DshSessionError, PersistenceError, SessionExistsError, SessionLockedError
from ..events import Event
from .base import Backend, Deleted, SessionSummary, cannot_delete, not_found
from .coordinator import PersistencePlugin

if TYPE_CHECKING:
    import datetime

    from .._search import SearchHit, Sort

    # Imported on first use: asyncio and concurrent.futures are for asyncio hosts only
    # (`dsh-session --help` and the synchronous API must not pay for them).
    from .aio import StoredHeaders, StoreWorker

__all__ = [
    "STORE_ENV",
    "DurableStore",
    "backend_for",
    "default_store_url",
    "open_store",
    "printable_url",
]

#: Where ``open_store()`` stores by default: a URL or a folder path.
STORE_ENV = "DSH_SESSION_STORE"

#: How many times :meth:`DurableStore.open_or_create` looks again after another writer
#: changed the id between its look and its act.
_OPEN_OR_CREATE_ATTEMPTS = 5

#: Guards the making of a store's worker thread (:meth:`DurableStore._worker`).
_WORKER_GUARD = threading.Lock()


class DurableStore(SessionStore):
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

    def _mint_id(self) -> str:
        # UUIDs: session-<n> would collide with the sessions of earlier processes.
        return str(uuid.uuid4())

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
        """
        session_id = id if id is not None else self._mint_id()
        self.backend.check_id(session_id)
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
            given (it holds events the log does not).
        :raises PersistenceError: nothing is stored under this id.
        :raises SessionLockedError: another writer holds it.
        """
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
        live = self.get(id)
        if live is not None:
            return live
        missing = str(not_found(id))
        last: Exception | None = None
        # Each retry follows another writer's create (or delete) that landed between our
        # look and our act: a few are plenty; a loop of them is someone deleting and
        # recreating the id as fast as we look, and its error is raised.
        for _ in range(_OPEN_OR_CREATE_ATTEMPTS):
            try:
                return self.open(id)
            except PersistenceError as exc:
                if type(exc) is not PersistenceError or str(exc) != missing:
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

        :raises PersistenceError: nothing is stored under this id, or a log of another
            format version.
        :raises LogFormatError: a stored line is corrupt (not a torn last line).
        """
        from .._readonly import ReadOnlySession

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

    # --- asyncio ------------------------------------------------------------------------
    #
    # Each operation below is its synchronous twin, awaited without blocking the event
    # loop (see .aio for the rule of what may run at once): natively where the backend
    # has an async hook for it, else in the store's worker thread, where the operations
    # run one at a time.

    #: The store's worker thread (:class:`~.aio.StoreWorker`), made at first use: a
    #: class default, since ``__init__`` need not know about asyncio.
    _aio_worker: StoreWorker | None = None

    def _worker(self) -> StoreWorker:
        worker = self._aio_worker
        if worker is None:
            from .aio import StoreWorker

            with _WORKER_GUARD:  # two threads' first awaited operations: one worker
                worker = self._aio_worker
                if worker is None:
                    worker = self._aio_worker = StoreWorker()
        return worker

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

        :raises PersistenceError: nothing is stored under this id.
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

        :raises PersistenceError: nothing is stored under this id.
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
        can (PostgreSQL, on psycopg's ``AsyncConnection``), else in a worker thread; then
        every other ``session_flush`` implementation runs, as :meth:`SessionStore.aflush`
        runs them. It does not queue behind the store's other awaited operations:
        flushes of different sessions run at once, each session's one at a time."""
        await self.persistence.aflush(session)
        await super().aflush(session)  # the persistence hook finds nothing left to write

    async def arelease(self, session: Session) -> None:
        """:meth:`release` for asyncio hosts: the flush as :meth:`aflush` does it, then
        the writer lock is released in the store's worker thread."""
        await self.persistence.aflush(session)
        await self._worker().run(self.release, session)

    def astored(self) -> StoredHeaders:
        """:meth:`stored` for asyncio hosts: ``await store.astored()`` for the list, or
        ``async for header in store.astored()``. Listed natively on PostgreSQL (one
        query on psycopg's ``AsyncConnection``), else in the store's worker thread."""
        from .aio import StoredHeaders

        return StoredHeaders(self._astored)

    async def _astored(self) -> list[SessionHeader]:
        native = getattr(self.backend, "alist", None)
        if native is not None:
            found: list[SessionHeader] = await native()
            return found
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

    def afollow(
        self,
        session_id: str,
        *,
        last: int = 0,
        timeout: float | None = None,
        on_note: Callable[[str], object] | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Follow a stored session from asyncio: ``async for event in
        store.afollow(id)`` gives its ``last`` stored events, then each event as it is
        committed (by this store or any other writer), decoded with this store's event
        types: what ``dsh-session tail -n LAST -f`` prints, as events.

        PostgreSQL waits on the session's NOTIFY channel natively; the other backends
        are polled every :data:`~.base.POLL_SECONDS`, each poll a short call in a thread
        (nothing waits in a thread, so a cancelled follower leaves nothing running).

        It ends after ``timeout`` seconds without news (``None``: never), or when its
        consumer is cancelled, closing what it opened (PostgreSQL: its listening
        connection). After a ``break``, close it at once with
        ``contextlib.aclosing(store.afollow(...))`` rather than leave that to the
        garbage collector.

        :param last: how many stored events to give first (``0``: only new ones).
        :param on_note: called with a note for people when the log was cut back under
            the follower (a crash repair): the events that follow continue from the seq
            it was cut back to.
        :raises PersistenceError: nothing is stored under this id (a session is stored
            from its first flushed event on).
        :raises LogFormatError: a stored line is not JSON.
        """
        from .aio import follow_events

        return follow_events(self.backend, self.persistence, session_id, last, timeout,
                             on_note)

    def release(self, session: Session) -> None:
        """Flush ``session`` and hand it back: it leaves the store and its writer lock is
        released, so another process may open and write it."""
        self.persistence.release(session)
        self.detach(session)

    def location(self, session_id: str) -> str:
        """Where a session's log lives: its JSONL file, or the SQLite database.

        :raises PersistenceError: no session with this id is live here or stored.
        """
        live = self.get(session_id)
        if live is not None:
            return self.backend.location(live.header)
        for header in self.stored():
            if header.id == session_id:
                return self.backend.location(header)
        msg = f'session "{session_id}" not found'
        raise PersistenceError(msg, session_id=session_id)

    def stored(self) -> list[SessionHeader]:
        """The headers of every stored session, live here or not: what ``dsh-session
        ls`` lists. The sessions live in this store (objects) are :meth:`live`."""
        return self.persistence.list()

    def append_stored(
        self, session_id: str, events: Iterable[Event | Mapping[str, Any]]
    ) -> None:
        """Durably append events to a stored session that is not live here."""
        self.persistence.append(session_id, events)

    # --- lifecycle: deleting and retention ---------------------------------------------

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove a stored session whole, physically: its log (the JSONL file, or its
        rows in one transaction) and its lock file. The session's writer lock, the one
        :meth:`open` takes, is taken first without waiting, so a session that a live
        writer holds (a live session of this store, another store, another process or
        host) is refused and left intact. Nothing but this session is touched.

        A fork holds a copy of its parent's events (its header names the parent), so
        deleting a parent leaves its children whole; their ``parent_session`` then names
        a session that is gone.

        :param dry_run: change nothing; say what would be removed (the lock is tested).
        :returns: what was removed (:class:`~.base.Deleted`: paths or rows, bytes freed).
        :raises SessionLockedError: a writer holds the session (release it first).
        :raises PersistenceError: no session is stored under this id (``not found``), or
            the backend cannot delete sessions.
        """
        if self.get(session_id) is not None:
            raise SessionLockedError(session_id, "a live session of this store: release "
                                                 "it first (store.release)")
        return self.persistence.delete(session_id, dry_run=dry_run)

    def prune(
        self,
        older_than: datetime.timedelta,
        *,
        cwd: str | None = None,
        keep: int = 0,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
    ) -> list[Deleted]:
        """Retention: delete the sessions whose last activity (the time of their last
        stored event; the header's ``created_at`` when that cannot be read) is older
        than ``now - older_than``, as :meth:`delete` deletes each.

        Of the sessions that match (old enough, and under ``cwd`` when given), the
        ``keep`` newest are kept (ties: by id). A session that a writer holds is never
        touched: it is reported with status ``"locked"``, and one that cannot be removed
        (a misplaced file, an I/O error) with ``"failed"`` and the reason; neither is an
        error, and the others are still removed. A session deleted meanwhile by someone
        else is left out. A session whose age cannot be told is never removed.

        :param older_than: the age past which a session goes (not negative).
        :param cwd: only sessions whose header's cwd is exactly this one.
        :param keep: how many of the matching sessions to keep, newest first.
        :param dry_run: remove nothing; report ``"would-delete"`` for each.
        :param now: the moment ages are measured from (default: the current time; a
            naive datetime is local time).
        :returns: one :class:`~.base.Deleted` per session removed (or that would be),
            locked or failed, oldest first.
        :raises ValueError: a negative ``older_than`` or ``keep``.
        :raises OSError: the store cannot be listed.
        :raises PersistenceError: the backend cannot delete sessions.
        """
        import datetime

        if older_than < datetime.timedelta(0):
            msg = f"older_than must not be negative, got {older_than}"
            raise ValueError(msg)
        if type(keep) is not int or keep < 0:
            msg = f"keep takes a count of sessions (0 or more), got {keep!r}"
            raise ValueError(msg)
        moment = now if now is not None else datetime.datetime.now(datetime.UTC)
        if moment.tzinfo is None:
            moment = moment.astimezone()
        # In microseconds since the epoch, exactly (event times are integers of ms).
        cutoff = (moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) - older_than
                  ) // datetime.timedelta(microseconds=1)
        matching: list[tuple[int | float, str, SessionSummary]] = []
        for summary in self.backend.summaries():
            header = summary.header
            if cwd is not None and header.cwd != cwd:
                continue
            when = _epoch_ms(summary.last_activity)
            if when is None:
                when = _epoch_ms(header.created_at)
            if when is None:
                continue  # its age cannot be told: never removed
            if when * 1000 < cutoff:
                matching.append((when, header.id, summary))
        matching.sort(key=lambda m: (m[0], m[1]), reverse=True)  # newest first
        doomed = sorted(matching[keep:], key=lambda m: (m[0], m[1]))
        remove = getattr(self.backend, "delete", None)
        if doomed and (remove is None or getattr(remove, "__func__", None) is Backend.delete):
            raise cannot_delete(self.backend, doomed[0][1])  # before anything is done
        done: list[Deleted] = []
        for when, session_id, summary in doomed:
            try:
                done.append(self.delete(session_id, dry_run=dry_run))
            except SessionLockedError as exc:
                done.append(self._left(summary, when, "locked", exc))
            except PersistenceError as exc:
                if str(exc) != str(not_found(session_id)):  # else: deleted meanwhile
                    done.append(self._left(summary, when, "failed", exc))
            except (DshSessionError, OSError) as exc:
                done.append(self._left(summary, when, "failed", exc))
        return done

    def _left(self, summary: SessionSummary, when: int | float, status: Any,
              exc: BaseException) -> Deleted:
        """A session prune had to leave as it is, and why."""
        header = summary.header
        try:
            where = self.backend.location(header)
        except Exception:  # only for the report
            where = ""
        reason = " ".join(str(exc).split())
        if isinstance(exc, OSError) and not isinstance(exc, DshSessionError):
            reason = f"{type(exc).__name__}: {reason}"
        return Deleted(header.id, status, where, (), None, summary.events, header, when,
                       reason)

    async def adelete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """:meth:`delete` for asyncio hosts, in the store's worker thread (taking the
        writer lock is synchronous; on PostgreSQL, a connect)."""
        return await self._worker().run(self.delete, session_id, dry_run=dry_run)

    async def aprune(
        self,
        older_than: datetime.timedelta,
        *,
        cwd: str | None = None,
        keep: int = 0,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
    ) -> list[Deleted]:
        """:meth:`prune` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.prune, older_than, cwd=cwd, keep=keep,
                                        dry_run=dry_run, now=now)

    # --- reading part of a stored session ----------------------------------------------

    def read(self, session_id: str, *, after: int = -1, limit: int | None = None
             ) -> list[Event]:
        """The stored events whose seq is greater than ``after``, at most ``limit`` of them,
        oldest first, decoded with this store's event types: a page of a session, read
        without loading the rest (JSONL: a binary search over the log; SQLite and
        PostgreSQL: a key range). Only what is stored is read (a live session's appends
        once flushed); nothing is written, no lock is taken, no crash is repaired.

        :param after: the seq the page starts after (``-1``: from the first event).
        :param limit: at most this many events (``None``: every one after ``after``).
        :raises PersistenceError: nothing is stored under this id.
        :raises ValueError: a negative ``limit``.
        """
        from .._decode import decode_lines
        from .base import read_lines_of

        if limit is not None and (type(limit) is not int or limit < 0):
            msg = f"limit takes a count of events (0 or more) or None, got {limit!r}"
            raise ValueError(msg)
        lines = read_lines_of(self.backend, session_id, int(after), limit)
        if lines is None:
            raise not_found(session_id)
        return decode_lines(self.registry, lines)

    def tail(self, session_id: str, count: int) -> list[Event]:
        """The last ``count`` stored events, oldest first, read from the end of the log
        (JSONL: backwards in blocks; SQLite and PostgreSQL: the last keys), decoded with
        this store's event types. A torn last line is left out. Nothing is written.

        :raises PersistenceError: nothing is stored under this id.
        :raises ValueError: a negative ``count``.
        """
        from .._decode import decode_lines

        if type(count) is not int or count < 0:
            msg = f"count takes a number of events (0 or more), got {count!r}"
            raise ValueError(msg)
        found = self.backend.tail_lines(session_id, count)
        if found is None:
            raise not_found(session_id)
        return decode_lines(self.registry, found.lines)

    def read_lines(self, session_id: str, *, types: Collection[str]) -> list[bytes]:
        """The stored log lines of the events whose type is one of ``types``, oldest
        first, undecoded: for a reader that decodes them into types of its own, in one
        call, and needs no other event (JSONL: one read of the file and a search of its
        bytes, the other lines never split out). A line whose type cannot be told
        without parsing it (written by hand, ``type`` not first) is among them: the
        reader's decoding decides. Only what is stored is read; nothing is written, no
        lock is taken, no crash is repaired (a torn last line is left out).

        :raises PersistenceError: nothing is stored under this id.
        """
        from .base import lines_of_types_of

        lines = lines_of_types_of(self.backend, session_id, types)
        if lines is None:
            raise not_found(session_id)
        return lines

    async def aread_lines(self, session_id: str, *, types: Collection[str]) -> list[bytes]:
        """:meth:`read_lines` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.read_lines, session_id, types=types)

    async def aread(self, session_id: str, *, after: int = -1, limit: int | None = None
                    ) -> list[Event]:
        """:meth:`read` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.read, session_id, after=after, limit=limit)

    async def atail(self, session_id: str, count: int) -> list[Event]:
        """:meth:`tail` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(self.tail, session_id, count)

    # --- full-text search ---------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        types: Iterable[str] = (),
        roles: Iterable[str] = (),
        sessions: Iterable[str] = (),
        since: datetime.datetime | int | float | None = None,
        until: datetime.datetime | int | float | None = None,
        sort: Sort = "newest",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[SearchHit]:
        """Search the stored sessions' messages, tool calls and tool results.

        ``query`` is words that must all be in an event (caseless, whole words;
        ``word*`` for a prefix, ``"two words"`` for a phrase); what is searched and how
        words are told apart is in docs/search.md. Only what is stored is searched: a
        live session's appends are found once flushed. SQLite and PostgreSQL answer
        from an index kept in step with the log; JSONL scans the logs. Every backend
        gives the same hits for the same sessions.

        :param types: only these event types (``tool/result``...).
        :param roles: only these roles: ``user``, ``assistant``, ``tool``.
        :param sessions: only these sessions.
        :param since: only events at or after this moment (a datetime, or epoch ms).
        :param until: only events before this moment.
        :param sort: ``"newest"`` first, or most ``"relevance"`` first.
        :param limit: at most this many hits (``None``: all).
        :param offset: skip this many hits first (paging).
        :returns: the hits (:class:`~dsh_session_core.SearchHit`), in ``sort`` order.
        :raises ValueError: a query without words, an unknown type or role, a negative
            limit or offset.
        """
        from .._search import SearchQuery
        from .search import search_backend, search_page

        if limit is not None and (type(limit) is not int or limit < 0):
            msg = f"limit takes a count of hits (0 or more) or None, got {limit!r}"
            raise ValueError(msg)
        if type(offset) is not int or offset < 0:
            msg = f"offset takes a count of hits (0 or more), got {offset!r}"
            raise ValueError(msg)
        if sort not in ("newest", "relevance"):
            msg = f"sort is 'newest' or 'relevance', got {sort!r}"
            raise ValueError(msg)
        parsed = SearchQuery.parse(query, types=types, roles=roles, sessions=sessions,
                                   since=_moment(since, "since"),
                                   until=_moment(until, "until"))
        return search_page(search_backend(self.backend, parsed), sort, limit, offset)

    async def asearch(
        self,
        query: str,
        *,
        types: Iterable[str] = (),
        roles: Iterable[str] = (),
        sessions: Iterable[str] = (),
        since: datetime.datetime | int | float | None = None,
        until: datetime.datetime | int | float | None = None,
        sort: Sort = "newest",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[SearchHit]:
        """:meth:`search` for asyncio hosts, in the store's worker thread."""
        return await self._worker().run(
            self.search, query, types=tuple(types), roles=tuple(roles),
            sessions=tuple(sessions), since=since, until=until, sort=sort, limit=limit,
            offset=offset)

    def close(self) -> None:
        """Flush every session, release the writer locks, close the backend."""
        try:
            self.persistence.close()
        finally:
            self._stop_worker()

    async def aclose(self) -> None:
        """:meth:`close` for asyncio hosts: the final flushes and the lock releases run
        in the store's worker thread, after the awaited operations queued before; the
        backend is closed natively when it can (PostgreSQL closes its asyncio
        connections politely), else in that thread.

        :raises ExceptionGroup: ``<backend name> dispose failed``, with every failure.
        """
        persistence = self.persistence
        try:
            if persistence.closed:
                return
            worker = self._worker()
            errors = await worker.run(persistence.close_sessions)
            native = getattr(self.backend, "aclose", None)
            try:
                if native is not None:
                    await native()
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

    async def __aenter__(self) -> DurableStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __enter__(self) -> DurableStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _moment(value: object, name: str) -> int | float | None:
    """A search bound as epoch ms: a datetime (naive: local time), or a number."""
    import datetime

    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        return value.timestamp() * 1000
    if type(value) in (int, float):
        return value  # type: ignore[return-value]
    msg = f"{name} takes a datetime or epoch milliseconds, got {value!r}"
    raise TypeError(msg)


def _epoch_ms(value: object) -> int | float | None:
    """An event's or a header's time as epoch milliseconds, or ``None`` when it is no
    finite number (a log written by hand may hold anything there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (value == value and abs(value) < 1e300):
        return None
    return value


def default_store_url() -> str:
    """The embedded default: ``$DSH_SESSION_STORE``, else a JSONL folder in the user's
    data directory."""
    from .urls import data_folder_store

    configured = os.environ.get(STORE_ENV)
    if configured:
        return configured
    return data_folder_store()


def backend_for(
    url: str,
    *,
    create: bool = True,
    plugins: Callable[[], PluginManager] | None = None,
) -> Backend:
    """The backend a store URL names: the one place where URLs map to backends.

    A path in a URL follows SQLAlchemy's rule (:mod:`.urls`): three slashes then a
    relative path, four for an absolute one.

    - ``sqlite:///name.db`` (``name.db`` in the working folder), ``sqlite:////abs/name.db``,
      ``sqlite:name.db``, or ``sqlite://`` and ``sqlite::memory:`` (in memory): SQLite;
    - ``postgresql://user@host:port/dbname`` (or ``postgres://``): PostgreSQL, shared by
      many hosts (needs the ``postgresql`` extra: psycopg 3);
    - ``memory:``: in memory (tests, throwaway sessions);
    - a folder path, ``jsonl:///folder``, ``jsonl:////abs/folder``, ``jsonl:folder``, or
      ``file:///abs/folder`` (RFC 8089: always absolute): JSONL;
    - ``jsonl+zstd:///folder``, ``jsonl+zstd:////abs/folder`` or ``jsonl+zstd:folder``:
      compact JSONL, each log's batches zstd frames (needs the ``zstd`` extra:
      zstandard);
    - any other scheme: the backend a plugin opens for it (the ``store_backend`` hook).

    A store is created in a folder that exists, never with the folders above it
    (:class:`StoreFolderError`; the embedded default's folders are made as needed).

    :param create: whether the store may be created; ``False`` for readers: a SQLite
        file that does not exist, or a PostgreSQL database without dsh-session's tables,
        is then :class:`StoreNotFoundError` (JSONL and memory stores create nothing on
        open: a missing folder holds no session, see :meth:`Backend.exists`).
    :param plugins: the plugins to ask about a scheme core does not know, called only
        then (default: the installed plugins, :func:`create_plugin_manager`).
    :raises ValueError: an unknown scheme no plugin opens, with the ones that are known.
    :raises StoreUrlError: a URL of a built-in scheme with a host or options.
    :raises StoreFolderError: ``create``, and the folder the store would be created in
        does not exist.
    :raises StoreNotFoundError: not ``create``, and the store does not exist.
    :raises StoreKindError: a JSONL folder of the other kind (compact, or plain).
    :raises MissingExtraError: a compact store without zstandard installed.
    """
    from .urls import check_folder, local_store

    scheme = url.partition(":")[0]
    if scheme == "memory":
        from .memory import MemoryBackend

        return MemoryBackend()
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresBackend

        return PostgresBackend(url, create=create)
    local = local_store(url)
    if local is not None:  # a SQLite file, a JSONL folder (or a SQLite in memory)
        kind, path = local
        if kind == "sqlite":  # which checks its folder itself, when it may create
            from .sqlite import SqliteBackend

            return SqliteBackend(path, create=create)
        if create:  # made in a folder that exists, if at all
            check_folder(os.path.abspath(path))
        if kind == "jsonl+zstd":
            from .jsonl_zstd import JsonlZstdBackend

            return JsonlZstdBackend(path)
        from .jsonl import JsonlBackend

        return JsonlBackend(path)
    from .._plugins import PluginHooks

    pm = plugins() if plugins is not None else create_plugin_manager()
    backend = PluginHooks(pm).store_backend(url, create)
    if backend is not None:
        return backend
    msg = (
        f"unknown store URL scheme {scheme!r} in {url!r}: use a folder path, jsonl:///path, "
        f"jsonl+zstd:///path, sqlite:///path.db (relative; sqlite:////abs/path.db is "
        f"absolute), postgresql://host/dbname or memory:"
    )
    raise ValueError(msg)


def printable_url(url: str) -> str:
    """A store URL for messages: without the password of a ``scheme://user:password@``
    URL, or of a ``password=`` query parameter; any other URL exactly as given."""
    if "://" not in url:
        return url
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    query = parse_qsl(parts.query, keep_blank_values=True)
    secret_query = any(k == "password" for k, _ in query)
    if not (at and ":" in user) and not secret_query:
        return url  # nothing to hide: never respelt
    netloc = f"{user.partition(':')[0]}@{host}" if at else parts.netloc
    if secret_query:
        parts = parts._replace(query=urlencode([(k, v) for k, v in query if k != "password"]))
    return urlunsplit(parts._replace(netloc=netloc))


def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    plugin_manager: PluginManager | None = None,
    clock: Clock | None = None,
    strict: bool = True,
    foreign_types: Iterable[str] = (),
    checks: bool = False,
) -> DurableStore:
    """Open a durable store: the embedded default (JSONL in the user's data folder) when
    ``url`` is omitted, else the backend the URL names (see :func:`backend_for`).

    :param strict: appends refuse an event type no plugin declares, an unknown key and
        an unknown union member (the default); ``False`` keeps them verbatim, for a
        harness that appends foreign events on purpose.
    :param foreign_types: event-type patterns (``"myharness/*"``) appended verbatim
        even when strict.
    :param checks: appends also refuse an event that breaks turn enclosure or tool
        pairing (a ``tool/result`` answering no ``tool/call`` of its turn and step).
    """
    target = os.fspath(url) if url is not None else default_store_url()
    pm = plugin_manager

    def plugins() -> PluginManager:  # made once, and only when a plugin is asked
        nonlocal pm
        if pm is None:
            pm = create_plugin_manager()
        return pm

    backend = backend_for(target, plugins=plugins)
    return DurableStore(backend, pm, clock=clock, strict=strict,
                        foreign_types=foreign_types, checks=checks)
