"""``DshSessionService``: Google ADK's ``BaseSessionService`` over a dsh-session store.

One ADK session is one dsh session, whose id is derived from the ADK triple
``(app_name, user_id, session_id)`` (ADK ids are unique per app and user only, and may
hold any character). Its log holds ``adk/session`` (owner and initial state), an
``adk/event`` per persisted ADK event (the event whole, as ADK dumps it to JSON) followed
by the dsh message events it maps onto, and ``adk/deleted`` when deleted. The ADK view is
a fold of that log from its last ``adk/session`` on. App state and user state live in one
dsh session per app and one per app and user, as ``adk/state`` deltas.

The service writes a session it holds live in its store: the store's writer lock (one
writer per session, across processes and hosts) stays with it until :meth:`close`. App
and user state sessions are opened, appended and released on each write, so every
service of the app may write them: a write finding another one under way waits for it
(up to ``lock_timeout``).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event as AdkEvent
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session as AdkSession
from google.adk.sessions.state import State
from typing_extensions import override

from dsh_session_core import DurableStore, Forgotten, Session, SessionHeader, open_store
from dsh_session_core.errors import (
    EncryptionError,
    LogFormatError,
    PersistenceError,
    SessionLockedError,
    SessionNotStoredError,
    UnreadableSessionWarning,
)

from ._mapping import TurnCursor, enclosed, end_turn, map_event
from ._view import View, copy_of, fold_records, fold_session, fold_state, view_of

__all__ = ["DshSessionService", "dsh_session_id"]

_STALE_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
#: Seconds a write of the app's or a user's state waits for another writer of it.
DEFAULT_LOCK_TIMEOUT = 30.0
_LOCKED_MESSAGE = (
    "Another writer holds this session (dsh-session's one writer per session). "
    "Please reload the session once that writer has released it."
)


def _digest(*parts: str) -> str:
    h = hashlib.sha256("\x00".join(parts).encode())
    return h.hexdigest()[:20]


def dsh_session_id(app_name: str, user_id: str | None = None,
                   session_id: str | None = None) -> str:
    """The dsh session id of an ADK session, or of an app's (``user_id=None``) or a
    user's (``session_id=None``) state session.

    :returns: ``adk-app-H``, ``adk-user-H-H`` or ``adk-s-H-H-H``, each ``H`` a digest.
    """
    app = _digest(app_name)
    if user_id is None:
        return f"adk-app-{app}"
    user = _digest(app_name, user_id)
    if session_id is None:
        return f"adk-user-{app}-{user}"
    return f"adk-s-{app}-{user}-{_digest(app_name, user_id, session_id)}"


#: The event types the ADK view is folded from.
_ADK_TYPES = ("adk/session", "adk/event", "adk/deleted")
_decode_record = msgspec.json.Decoder(dict[str, Any]).decode
#: How many views of sessions read but not held a service keeps.
_COLD_VIEWS = 64


def _json_safe(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return _session_util.extract_json_safe_state_delta(dict(state))


@dataclass
class _Live:
    """An ADK session this service writes: its live dsh session, view and turn state."""

    session: Session
    view: View
    cursor: TurnCursor


class DshSessionService(BaseSessionService):
    """An ADK session service whose sessions are dsh-session logs.

    :param store: a store URL (a folder, ``sqlite:///...``, ``postgresql://...``,
        ``memory:``), ``None`` for the embedded default, or an open
        :class:`~dsh_session_core.DurableStore` (then :meth:`close` leaves it open).
    :param lock_timeout: seconds a write of the app's or a user's state waits while
        another service (another process, another host) writes it; a session of its
        own is not waited for: held by another service, it is ADK's
        ``StaleSessionError`` at once.
    """

    def __init__(self, store: str | DurableStore | None = None, *,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        """Open the store (or adopt the given one)."""
        self.lock_timeout = lock_timeout
        if isinstance(store, DurableStore):
            self.store = store
            self._owns_store = False
        else:
            self.store = open_store(store)
            self._owns_store = True
        self._live: dict[str, _Live] = {}
        #: Views of sessions read, not held, most recent last (:meth:`_stored_view`).
        self._cold: OrderedDict[str, View] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    # --- plumbing -----------------------------------------------------------------------

    def _lock(self, dsh_id: str) -> asyncio.Lock:
        lock = self._locks.get(dsh_id)
        if lock is None:
            lock = self._locks[dsh_id] = asyncio.Lock()
        return lock

    async def _stored_events(self, dsh_id: str) -> list[Any] | None:
        """A stored log read without taking its writer lock, or ``None``."""
        live = self.store.get(dsh_id)
        if live is not None:
            return list(live.events)
        stored = await asyncio.to_thread(
            self.store.backend.load_stored, dsh_id, self.store.registry)
        return None if stored is None else stored.events

    async def _view(self, app_name: str, user_id: str, session_id: str) -> View | None:
        dsh_id = dsh_session_id(app_name, user_id, session_id)
        live = self._live.get(dsh_id)
        if live is not None:
            return live.view
        if self.store.get(dsh_id) is not None:  # live in the store, not this service's
            events = await self._stored_events(dsh_id)
            view = None if events is None else fold_session(events)[0]
        else:
            view = await asyncio.to_thread(self._stored_view, dsh_id)
        if view is None or view.deleted:
            return None
        return view

    def _stored_view(self, dsh_id: str) -> View | None:
        """The view of a stored session this service does not hold, ``None`` when it is
        not stored. The log's last line is read from the end: when its seq is the one a
        view kept from an earlier read ends at, that view is used again (its events
        validated once); when the log grew, only the lines after it are read and folded;
        else (a first read, a new ``adk/session``, a log cut back) the ``adk/*`` lines
        are read (the mapped message events are neither split out nor decoded)."""
        backend = self.store.backend
        tail = backend.tail_lines(dsh_id, 1)
        if tail is None:
            self._cold.pop(dsh_id, None)
            return None
        end = _decode_record(tail.lines[-1])["seq"] + 1 if tail.lines else 0
        view = self._cold.get(dsh_id)
        if view is not None and view.revision < end:
            lines = backend.read_lines(dsh_id, view.revision - 1, None) or []
            records = [_decode_record(line) for line in lines]
            if (records and records[0]["seq"] == view.revision
                    and not any(r["type"] == "adk/session" for r in records)):
                fold_records(view, records)
                view.revision = end
        if view is None or view.revision != end:
            try:
                lines = self.store.read_lines(dsh_id, types=_ADK_TYPES)
            except PersistenceError:
                return None
            view = view_of([_decode_record(line) for line in lines])
            if view is None:
                return None
            view.revision = end
        self._cold[dsh_id] = view
        self._cold.move_to_end(dsh_id)
        while len(self._cold) > _COLD_VIEWS:
            self._cold.popitem(last=False)
        return view

    async def _resolve(self, app_name: str, user_id: str, session_id: str) -> str:
        """``session_id`` as ADK's services take it: stripped of surrounding whitespace,
        unless a session is stored under the id exactly as given (as ADK's
        ``SqliteSessionService`` resolves it; its in-memory service always strips, and
        strips on create, so the two agree on every id this service wrote)."""
        if not session_id or session_id == session_id.strip():
            return session_id
        if await self._view(app_name, user_id, session_id) is not None:
            return session_id
        return session_id.strip()

    async def _scoped_state(self, app_name: str, user_id: str | None) -> dict[str, Any]:
        events = await self._stored_events(dsh_session_id(app_name, user_id))
        return {} if events is None else fold_state(events)

    async def _write_state(self, scope: str, app_name: str, user_id: str | None,
                           delta: dict[str, Any]) -> None:
        """Append one ``adk/state`` delta to the app's or the user's state session."""
        if not delta:
            return
        dsh_id = dsh_session_id(app_name, user_id)
        async with self._lock(dsh_id):
            session = await self._acquire(dsh_id, wait=True)
            try:
                enclosed(session, fold_session(session.events)[1], "adk/state",
                         {"scope": scope, "appName": app_name, "userId": user_id,
                          "delta": delta})
            finally:
                await self.store.arelease(session)

    async def _acquire(self, dsh_id: str, *, wait: bool = False) -> Session:
        """The dsh session live here, opened (or created) with its writer lock; with
        ``wait``, waiting up to :attr:`lock_timeout` for another writer to release it.

        :raises StaleSessionError: another writer holds it.
        """
        live = self.store.get(dsh_id)
        if live is not None:
            return live
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                # The store's get-or-create: one look, no read of the log beforehand,
                # and two processes making the same new session at once both get it
                # (one creates, the other opens) instead of one failing at its flush.
                return await self.store.aopen_or_create(dsh_id)
            except SessionLockedError as exc:
                if not wait or time.monotonic() >= deadline:
                    raise StaleSessionError(_LOCKED_MESSAGE) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    @staticmethod
    def _events_of(view: View, config: GetSessionConfig | None) -> list[AdkEvent]:
        """The events ``config`` asks for, as fresh ``Event`` objects: shallow copies of
        the view's validated events (each dump is validated once, and only when asked
        for: ``num_recent_events`` and ``after_timestamp`` pick the dumps first)."""
        start, stop = 0, len(view.events)
        if config is not None:
            if config.num_recent_events is not None:
                start = max(stop - config.num_recent_events, 0) if config.num_recent_events \
                    else stop
            if config.after_timestamp is not None:
                # The events after the last one older than the bound, as ADK's
                # in-memory service cuts them (timestamps need not be in order).
                after, i = config.after_timestamp, stop - 1
                while i >= start and float(view.events[i]["timestamp"]) >= after:
                    i -= 1
                start = i + 1
        return [copy_of(view, i) for i in range(start, stop)]

    def _merge(self, view: View, app_state: Mapping[str, Any],
               user_state: Mapping[str, Any], events: list[AdkEvent]) -> AdkSession:
        state = dict(view.state)
        for key, value in app_state.items():
            state[State.APP_PREFIX + key] = value
        for key, value in user_state.items():
            state[State.USER_PREFIX + key] = value
        session = AdkSession(
            id=view.session_id, app_name=view.app_name, user_id=view.user_id, state=state,
            events=events,
            last_update_time=view.last_update_time,
        )
        session._storage_update_marker = str(view.revision)
        return session

    # --- BaseSessionService -------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        """Create a session; ``app:`` and ``user:`` keys of ``state`` go to the shared
        state, ``temp:`` ones are dropped.

        :raises AlreadyExistsError: a session with this id exists (and is not deleted).
        """
        session_id = (await self._resolve(app_name, user_id, session_id)
                      if session_id else None)
        if not session_id:
            session_id = str(uuid.uuid4())
        deltas = _json_safe(state or {})
        dsh_id = dsh_session_id(app_name, user_id, session_id)
        async with self._lock(dsh_id):
            if await self._view(app_name, user_id, session_id) is not None:
                msg = f"Session with id {session_id} already exists."
                raise AlreadyExistsError(msg)
            exists = f"Session with id {session_id} already exists."
            try:
                session = await self._acquire(dsh_id)
            except StaleSessionError:
                # Another service holds it: it created the session since our look (or
                # is writing it), as ADK's services report a duplicate id.
                raise AlreadyExistsError(exists) from None
            if not session.created and (view := fold_session(session.events)[0]) \
                    and not view.deleted:
                # Another process created it between our look and our lock.
                await self.store.arelease(session)
                raise AlreadyExistsError(exists)
            now = time.time()
            enclosed(session, fold_session(session.events)[1], "adk/session", {
                "appName": app_name, "userId": user_id, "sessionId": session_id,
                "state": deltas["session"], "createTime": now,
            })
            await self.store.aflush(session)
            view, cursor = fold_session(session.events)
            assert view is not None
            self._live[dsh_id] = _Live(session, view, cursor)
        await self._write_state("app", app_name, None, deltas["app"])
        await self._write_state("user", app_name, user_id, deltas["user"])
        return self._merge(view, await self._scoped_state(app_name, None),
                           await self._scoped_state(app_name, user_id), [])

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        """The session with its events (filtered by ``config``) and merged state, or
        ``None`` when there is none or it was deleted."""
        session_id = await self._resolve(app_name, user_id, session_id)
        view = await self._view(app_name, user_id, session_id)
        if view is None:
            return None
        return self._merge(view, await self._scoped_state(app_name, None),
                           await self._scoped_state(app_name, user_id),
                           self._events_of(view, config))

    async def _headers(self) -> list[SessionHeader]:
        return list(await self.store.astored())

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's (or the user's) sessions without events, oldest update first. A
        stored one that cannot be read (its key deleted: crypto-shredded; a damaged
        record) is left out with an :class:`~dsh_session_core.errors.
        UnreadableSessionWarning`, the others listed."""
        prefix = ("adk-s-" + _digest(app_name) + "-"
                  + ("" if user_id is None else _digest(app_name, user_id) + "-"))
        ids = {h.id for h in await self._headers() if h.id.startswith(prefix)}
        ids |= {i for i in self._live if i.startswith(prefix)}
        views: list[View] = []
        for dsh_id in sorted(ids):
            live = self._live.get(dsh_id)
            if live is not None:
                view: View | None = live.view
            else:
                try:
                    events = await self._stored_events(dsh_id)
                except (EncryptionError, LogFormatError) as exc:
                    warnings.warn(UnreadableSessionWarning(dsh_id, exc), stacklevel=2)
                    continue
                view = None if events is None else fold_session(events)[0]
            if view is not None and not view.deleted and view.app_name == app_name and (
                    user_id is None or view.user_id == user_id):
                views.append(view)
        app_state = await self._scoped_state(app_name, None)
        user_states: dict[str, dict[str, Any]] = {}
        sessions = []
        for view in views:
            if view.user_id not in user_states:
                user_states[view.user_id] = await self._scoped_state(app_name, view.user_id)
            sessions.append(self._merge(view, app_state, user_states[view.user_id], []))
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Tombstone the session (``adk/deleted``): listing and getting skip it, its log
        stays. Deleting a session that does not exist does nothing."""
        session_id = await self._resolve(app_name, user_id, session_id)
        dsh_id = dsh_session_id(app_name, user_id, session_id)
        async with self._lock(dsh_id):
            if await self._view(app_name, user_id, session_id) is None:
                return
            session = await self._acquire(dsh_id)
            live = self._live.pop(dsh_id, None)
            cursor = live.cursor if live else fold_session(session.events)[1]
            end_turn(session, cursor, "disposed")
            enclosed(session, cursor, "adk/deleted", {"time": time.time()}, "disposed")
            await self.store.arelease(session)

    async def forget_session(self, *, app_name: str, user_id: str, session_id: str
                             ) -> Forgotten | None:
        """Forget the session for good (``store.forget``, docs/erasing.md): its log,
        rows, index entries and archived copies, what the deletes left made unreadable,
        a digest in the store's ledger; ``delete_session`` only tombstones it. A live
        session of this service is released first. ``None``: nothing is stored under
        it. (Its user's and app's state, shared with their other sessions, stay:
        :meth:`forget_user` forgets a user's.)"""
        session_id = await self._resolve(app_name, user_id, session_id)
        dsh_id = dsh_session_id(app_name, user_id, session_id)
        async with self._lock(dsh_id):
            await self._let_go([dsh_id])
            try:
                return await self.store.aforget(dsh_id, rule="adk-forget")
            except SessionNotStoredError as exc:
                if exc.session_id != dsh_id:
                    raise
                return None

    async def forget_user(self, *, app_name: str, user_id: str) -> list[Forgotten]:
        """Forget every session of a user of an app, tombstoned ones too, and the user's
        state (``store.forget_all``, docs/erasing.md): what a person's erasure asks for.
        The app's state, shared by every user, stays. Sessions of this service are
        released first.

        :returns: one :class:`~dsh_session_core.Forgotten` per dsh session, by id.
        """
        state = dsh_session_id(app_name, user_id)
        mine = [i for i, live in self._live.items()
                if (live.view.app_name, live.view.user_id) == (app_name, user_id)]
        await self._let_go(mine)
        ids = [state] if state in {h.id for h in await self._headers()} else []
        done: list[Forgotten] = await self.store.aforget_all(
            {"app": app_name, "user": user_id}, ids=ids, rule="adk-forget-user")
        for forgotten in done:
            self._cold.pop(forgotten.session_id, None)
        return done

    async def _let_go(self, dsh_ids: list[str]) -> None:
        """Release these sessions if this service holds them, and forget their views."""
        for dsh_id in dsh_ids:
            live = self._live.pop(dsh_id, None)
            if live is not None:
                await self.store.arelease(live.session)
            self._cold.pop(dsh_id, None)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's shared state, keys without the ``user:`` prefix."""
        return await self._scoped_state(app_name, user_id)

    async def get_app_state(self, *, app_name: str) -> dict[str, Any]:
        """The app's shared state, keys without the ``app:`` prefix."""
        return await self._scoped_state(app_name, None)

    @override
    async def append_event(self, session: AdkSession, event: AdkEvent) -> AdkEvent:
        """Persist ``event`` (unless ``partial``) and apply it to ``session``.

        :raises SessionNotFoundError: the session does not exist (or was deleted).
        :raises StaleSessionError: the session was written since ``session`` was read, or
            another writer holds it.
        """
        if event.partial:
            return event
        session_id = await self._resolve(session.app_name, session.user_id, session.id)
        dsh_id = dsh_session_id(session.app_name, session.user_id, session_id)
        async with self._lock(dsh_id):
            live = self._live.get(dsh_id)
            if live is None:
                if await self._view(session.app_name, session.user_id, session_id) is None:
                    msg = f"Session {session.id} not found."
                    raise SessionNotFoundError(msg)
                dsh = await self._acquire(dsh_id)
                view, cursor = fold_session(dsh.events)
                assert view is not None
                live = self._live[dsh_id] = _Live(dsh, view, cursor)
            view = live.view
            index = view.event_ids.get(event.id)
            if index is not None and copy_of(view, index) == event:
                return event  # the same event again: already persisted
            marker = session._storage_update_marker
            if marker is not None:
                if marker != str(view.revision):
                    raise StaleSessionError(_STALE_MESSAGE)
            elif view.last_update_time > session.last_update_time and (
                    (session.events[-1].id if session.events else None)
                    != (view.events[-1]["id"] if view.events else None)):
                raise StaleSessionError(_STALE_MESSAGE)
            self._apply_temp_state(session, event)
            event = self._trim_temp_delta_state(event)
            delta = dict(event.actions.state_delta) if event.actions.state_delta else {}
            deltas = _json_safe(delta)
            dump = event.model_dump(mode="json", by_alias=True, exclude_none=True)
            dsh = live.session
            try:
                map_event(dsh, live.cursor, event, dump)
                await self.store.aflush(dsh)
            except BaseException:
                # Nothing of a refused or failed append may stay live: reload from storage.
                self._live.pop(dsh_id, None)
                self.store.detach(dsh)
                raise
            view.add(dump, event.model_copy(deep=True))
            view.revision = dsh.seq
        await self._write_state("app", session.app_name, None, deltas["app"])
        await self._write_state("user", session.app_name, session.user_id, deltas["user"])
        session.last_update_time = event.timestamp
        session._storage_update_marker = str(view.revision)
        return self._commit_event_to_session(session, event)

    # --- lifetime -----------------------------------------------------------------------

    async def close(self) -> None:
        """Release every session this service writes and close the store it opened."""
        for live in list(self._live.values()):
            await self.store.arelease(live.session)
        self._live.clear()
        if self._owns_store:
            await self.store.aclose()

    async def __aenter__(self) -> DshSessionService:
        """``async with DshSessionService(url) as service``."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """:meth:`close`."""
        await self.close()
