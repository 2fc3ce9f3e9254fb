"""``DshSessionStore``: the Claude Agent SDK's ``SessionStore`` on a dsh-session store.

Each SDK key is one dsh session (:mod:`._keys`; a subagent's transcript a session of
its own whose header names the main transcript's as its parent). An ``append`` takes the
session's writer lock (waiting for another writer, up to ``lock_timeout``), records the
batch as whole turns (:mod:`._mapping`), the SDK's summary of a main transcript last,
flushes, and releases the session with an idle window: the next append within it takes
the session back at once, and one after it reads only what other writers stored since,
so an append costs what it writes, not the length of the log. An append that fails
leaves the stored log as it found it (``store.discard``). ``load`` reads the stored
events and rebuilds each entry (:func:`._mapping.rebuild`); the listings read the
store's session ids and the ``claude-agent/sessions`` projection's rows, never a log.
"""

from __future__ import annotations

__all__ = ["DshSessionStore"]

import asyncio
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, cast

from claude_agent_sdk import SessionStore, fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from dsh_session_core import DurableStore, Session, SessionLockedError, open_store
from dsh_session_core.errors import PersistenceError, PluginError, SessionNotStoredError

from ._keys import dsh_session_id, key_of, project_prefix, session_prefix
from ._mapping import REBUILT_FROM, State, rebuild, record
from ._projection import SESSIONS, SUMMARY_KEY

_T = TypeVar("_T")

#: How long an append (or a delete) waits for another writer of the session.
DEFAULT_LOCK_TIMEOUT = 30.0
#: How long the writer lock is kept after an append, for the next one to take the
#: session back without taking the lock or reading the log.
DEFAULT_IDLE_WINDOW = 0.25
#: What the retention ledger names as the door a delete came through.
_RULE = "claude-agent-delete"


class DshSessionStore(SessionStore):
    """The Claude Agent SDK's session store on a dsh-session store:
    ``ClaudeAgentOptions(session_store=DshSessionStore(...))``.

    :param store: a store URL (``"sqlite:///claude.db"``, a folder,
        ``postgresql://...``; opened here and closed by :meth:`close`), a
        :class:`DurableStore` of the caller's (left open), or ``None`` for the default
        store.
    :param lock_timeout: seconds an append or a delete waits for another writer of the
        session (another process, another store object) before raising
        ``SessionLockedError``.
    :param idle_window: seconds the writer lock is kept after an append (``0``:
        released at once); another process's append waits at most that long for it.

    Every method of the SDK's protocol is implemented: ``append`` and ``load``, and the
    optional ``list_sessions``, ``list_session_summaries``, ``list_subkeys`` and
    ``delete``. Each runs in a worker thread; appends to one session from this process
    are taken in call order.
    """

    def __init__(
        self,
        store: DurableStore | str | None = None,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        idle_window: float = DEFAULT_IDLE_WINDOW,
    ) -> None:
        self._owns_store = not isinstance(store, DurableStore)
        self.store: DurableStore = store if isinstance(store, DurableStore) else open_store(store)
        if "claude-agent/entries" not in self.store.registry:
            if self._owns_store:
                self.store.close()
            msg = ("the store's plugin manager does not know the claude-agent plugin's "
                   "event types: open the store with the installed plugins (the "
                   "default), or register dsh_session_claude_agent.plugin on its "
                   "plugin manager")
            raise PluginError(msg)
        self.lock_timeout = lock_timeout
        self.idle_window = idle_window
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        #: Each session the last append released (and its writer's state), to be taken
        #: back by the next append without loading the log.
        self._cached: dict[str, tuple[Session, State]] = {}
        self._closed = False

    # --- the protocol -------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Record ``entries`` (durable when this returns); ``[]`` changes nothing. A
        batch the log cannot keep (a value JSON cannot carry) is refused whole."""
        if not entries:
            return
        batch = list(entries)
        await self._off_loop(self._append, key, batch)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry appended under ``key``, in order, each as it was appended;
        ``None`` when nothing was."""
        return await self._off_loop(self._load, key)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The main transcripts of ``project_key``, with the time of their last append
        (epoch milliseconds), from their summary rows."""
        rows = await self._off_loop(self._rows, project_key)
        return [{"session_id": sid, "mtime": row.mtime} for sid, row in rows]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's summary of each main transcript of ``project_key``, as its last
        append folded it, from their summary rows (no log is read)."""
        return await self._off_loop(self._summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        """Remove the session (a main transcript's with its subagents'); nothing when
        none is stored. Recorded by the store's retention ledger (rule
        ``claude-agent-delete``)."""
        await self._off_loop(self._delete, key)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a main transcript (its subagents' transcripts)."""
        prefix = session_prefix(key)
        ids = await self._off_loop(self._ids, prefix)
        found: list[str] = []
        for sid in ids:
            parsed = key_of(sid)
            if parsed is not None and parsed[2] is not None:
                found.append(parsed[2])
        return found

    # --- closing ------------------------------------------------------------------

    def close(self) -> None:
        """End the idle windows of the sessions this instance released, then close the
        store if it was opened here from a URL. Safe to call again."""
        if self._closed:
            return
        self._closed = True
        with self._guard:
            cached = [session for session, _ in self._cached.values()]
            self._cached.clear()
        if not self.store.persistence.closed:
            for session in cached:
                self.store.end_idle(session)
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        """:meth:`close`, off the event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> DshSessionStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> DshSessionStore:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    # --- the work, in a worker thread -----------------------------------------------

    async def _off_loop(self, func: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.to_thread(func, *args)

    def _lock(self, session_id: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(session_id)
            if lock is None:
                lock = self._locks[session_id] = threading.Lock()
            return lock

    def _append(self, key: SessionKey, entries: list[Any]) -> None:
        session_id = dsh_session_id(key)
        main = key.get("subpath") is None
        with self._lock(session_id):
            session, state = self._take(session_id, key, entries)
            try:
                summary = None
                if main:
                    prev: SessionSummaryEntry | None = None
                    if state.summary is not None:
                        prev = {"session_id": key["session_id"], "mtime": 0,
                                "data": state.summary}
                    summary = fold_session_summary(prev, key, entries)["data"]
                record(session, state, entries, summary)
                self.store.release(session, idle=self.idle_window)
            except BaseException:
                if self.store.get(session_id) is session:
                    self.store.discard(session)
                raise
            with self._guard:
                self._cached[session_id] = (session, state)

    def _take(self, session_id: str, key: SessionKey, entries: list[Any]
              ) -> tuple[Session, State]:
        """The session, live and locked (taken back, opened or created), and its
        writer's state; another writer holding it is waited for up to the lock
        timeout."""
        with self._guard:
            cached = self._cached.pop(session_id, None)
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                session: Session | None = None
                if cached is not None:
                    try:
                        session = self.store.open(session_id, resume=cached[0])
                    except SessionNotStoredError:
                        cached = None  # deleted meanwhile: created anew below
                if session is None:
                    session = self.store.open_or_create(
                        session_id, cwd=_cwd(entries), parent_session=_parent(key))
                if cached is not None and session is cached[0]:
                    return session, cached[1]
                return session, State.of(session.events)
            except (SessionLockedError, PersistenceError) as exc:
                # Locked by another writer, or (a plain PersistenceError) created or
                # rewritten by one between our look and our act: wait, and look again.
                raced = type(exc) is PersistenceError
                if time.monotonic() >= deadline or not (
                        raced or isinstance(exc, SessionLockedError)):
                    if cached is not None:
                        with self._guard:
                            self._cached.setdefault(session_id, cached)
                    raise
                if raced:
                    cached = None  # the log changed under it: loaded whole below
                time.sleep(delay)
                delay = min(delay * 2, 0.1)

    def _load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        session_id = dsh_session_id(key)
        with self._lock(session_id):
            try:
                lines = self.store.read_lines(session_id, types=REBUILT_FROM)
            except SessionNotStoredError:
                return None
        return cast("list[SessionStoreEntry]", rebuild(lines))

    def _ids(self, prefix: str) -> list[str]:
        return [h.id for h in self.store.stored() if h.id.startswith(prefix)]

    def _rows(self, project_key: str) -> list[tuple[str, Any]]:
        mains: dict[str, str] = {}
        for sid in self._ids(project_prefix(project_key)):
            parsed = key_of(sid)
            if parsed is not None and parsed[2] is None and parsed[0] == project_key:
                mains[sid] = parsed[1]
        rows = self.store.projection_summaries(SESSIONS.name, list(mains))
        return [(mains[sid], row) for sid, row in rows.items() if sid in mains]

    def _summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        found: list[SessionSummaryEntry] = []
        for sid, row in self._rows(project_key):
            main = dsh_session_id({"project_key": project_key, "session_id": sid})
            try:
                summary = self.store.projection(main, SESSIONS.name).get(SUMMARY_KEY)
            except SessionNotStoredError:
                continue  # deleted since the listing
            if summary is not None:
                found.append({"session_id": sid, "mtime": row.mtime, "data": summary.data})
        return found

    def _delete(self, key: SessionKey) -> None:
        session_id = dsh_session_id(key)
        ids = [session_id]
        if key.get("subpath") is None:
            ids += self._ids(session_prefix(key))
        for sid in ids:
            with self._lock(sid):
                with self._guard:
                    cached = self._cached.pop(sid, None)
                if cached is not None and not self.store.persistence.closed:
                    self.store.end_idle(cached[0])
                self._delete_one(sid)

    def _delete_one(self, session_id: str) -> None:
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                self.store.delete(session_id, rule=_RULE)
                return
            except SessionNotStoredError:
                return
            except SessionLockedError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.1)


def _cwd(entries: list[Any]) -> str | None:
    """The working directory of a new session's header: the first entry's ``cwd``."""
    for entry in entries:
        cwd = entry.get("cwd") if isinstance(entry, dict) else None
        if isinstance(cwd, str) and os.path.isabs(cwd):
            return cwd
    return None


def _parent(key: SessionKey) -> str | None:
    """A subagent's transcript's parent: the main transcript's session."""
    if key.get("subpath") is None:
        return None
    return dsh_session_id({"project_key": key["project_key"],
                           "session_id": key["session_id"]})
