"""``DshConversationStore``: pydantic-ai's ``ConversationStore`` on a dsh-session store.

pydantic-ai's ABC works out saves, branches, forks and lists; this class implements its
five storage primitives (``read_record``, ``read_records``, ``write_record``,
``delete_record``, ``read_entry``, and ``read_history`` in one read). A conversation is
the dsh session of its id. Each ``write_record`` is one turn of it: a
``pydantic-ai/entry`` per new entry, each followed by the typed events of its message
(:mod:`._mapping`), then the ``pydantic-ai/record``, then ``turn/end``, appended under
the session's writer lock after the stored revision was checked, and flushed before
the lock is released: two writers saving on one revision, in one process or two,
cannot both win. What :mod:`._log` reads back is what was flushed.
"""

from __future__ import annotations

__all__ = ["DshConversationStore"]

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from pydantic_ai.conversation_store import (
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import ModelRequest, UserPromptPart

from dsh_session_core import DurableStore, PersistenceError, Session, open_store, resurface
from dsh_session_core.errors import SessionExistsError, SessionLockedError

from ._log import (
    DELETED,
    ENTRY,
    RECORD,
    ConversationLog,
    dump_message,
    dump_record,
    fold_events,
    load_message,
    load_record,
    plain,
    read_log,
)
from ._mapping import PLUGIN, MessageWriter, history_messages, pending_calls, system_prompts
from .errors import ConversationRevisionConflict, EntryNotFoundError

#: How long a write waits for another writer of the conversation before it gives up.
DEFAULT_LOCK_TIMEOUT = 30.0
#: How many times an open that found the log changed under it is tried again.
_REOPENS = 20
#: What the store's record of a removal (``prune --log``) names as its door: a
#: conversation deleted through pydantic-ai, its session removed.
DELETE_RULE = "pydantic-ai-delete"


class DshConversationStore(ConversationStore):
    """A pydantic-ai ``ConversationStore`` whose conversations are dsh sessions.

    :param store: a store URL (``"sqlite:///chats.db"``, a folder, ``postgresql://...``;
        opened here, closed by :meth:`close`), a :class:`DurableStore` of the caller's
        (left open), or ``None`` for the default store.
    :param lock_timeout: seconds a write waits for another writer of the conversation
        (another store object or process) before ``SessionLockedError``.

    Each operation runs in a worker thread, one at a time per instance (share one
    instance within a process). ``delete`` writes a ``pydantic-ai/deleted`` under the
    lock, then removes the session whole (``DurableStore.delete``) unless another
    writer wrote it since; a fork holds its own copy of the source's log, so deleting
    the source leaves the fork whole.
    """

    def __init__(self, store: DurableStore | str | None = None, *,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        self._owns_store = not isinstance(store, DurableStore)
        self.store: DurableStore = store if isinstance(store, DurableStore) else open_store(store)
        self.lock_timeout = lock_timeout
        #: The logs of the conversations last read (their entries): the ABC reads a
        #: record, then the history its head reaches, which is in the same log.
        self._logs: dict[str, ConversationLog] = {}
        self._turn = asyncio.Lock()
        #: The session the running write holds (discarded if the write fails).
        self._current: Session | None = None
        self._closed = False

    # --- the primitives ------------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's newest record, read from what is stored (no lock taken);
        its entries are read with it."""
        log = await self._call(read_log, self.store, conversation_id)
        if log is None or log.record is None:
            self._logs.pop(conversation_id, None)
            return None
        self._logs[conversation_id] = log
        return load_record(plain(log.record))

    async def read_records(self, *, scope: str | None = None, limit: int | None = None
                           ) -> Sequence[ConversationRecord]:
        """Every stored conversation's record (sessions holding none are not
        conversations), or those of ``scope``, newest ``updated_at`` first."""
        records: list[ConversationRecord] = await self._call(self._records_now, scope)
        records.sort(key=lambda record: record.updated_at, reverse=True)
        return records[:limit]

    async def write_record(self, record: ConversationRecord, *,
                           new_entries: Sequence[ConversationEntry] = (),
                           expected_revision: str | None) -> None:
        """Append ``new_entries`` and ``record`` as one turn of the conversation's
        session, once its stored revision is checked under its writer lock.

        :raises ConversationRevisionConflict: the stored revision is not
            ``expected_revision``, or the head is in no entry of the log.
        :raises SessionLockedError: another writer held it for ``lock_timeout``.
        """
        log = await self._call(self._write_now, record, list(new_entries), expected_revision)
        self._logs[record.conversation_id] = log

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation at ``expected_revision`` (see the class).

        :raises ConversationRevisionConflict: not stored, or at another revision.
        """
        self._logs.pop(conversation_id, None)
        await self._call(self._delete_now, conversation_id, expected_revision)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry, from the logs this store has read.

        :raises EntryNotFoundError: in none of them (a :class:`KeyError`).
        """
        for log in self._logs.values():
            if entry_id in log.entries:
                return log.entry(entry_id)
        raise EntryNotFoundError(entry_id)

    async def read_history(self, head_id: str | None, *, limit: int | None = None
                           ) -> list[ConversationEntry]:
        """The entries up to ``head_id`` (the last ``limit``), from the one log that
        holds it: every entry a record reaches is in its own session's log."""
        if head_id is None:
            return []
        for log in self._logs.values():
            if head_id in log.entries:
                try:
                    return [log.entry(i) for i in log.chain(head_id, limit)]
                except KeyError as exc:
                    raise EntryNotFoundError(str(exc.args[0])) from None
        raise EntryNotFoundError(head_id)

    # --- the store -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if this instance opened it from a URL. Safe to call again."""
        if self._owns_store and not self._closed:
            self._closed = True
            self.store.close()

    async def aclose(self) -> None:
        """:meth:`close`, off the event loop."""
        if self._owns_store and not self._closed:
            self._closed = True
            await self.store.aclose()

    async def __aenter__(self) -> DshConversationStore:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def _call(self, function: Any, *args: Any) -> Any:
        """Run ``function`` in a worker thread, one call of this instance at a time."""
        async with self._turn:
            return await asyncio.to_thread(function, *args)

    # --- in the worker thread --------------------------------------------------------------

    def _records_now(self, scope: str | None) -> list[ConversationRecord]:
        records: list[ConversationRecord] = []
        for header in self.store.stored():
            log = read_log(self.store, header.id, entries=False)
            if log is None or log.record is None:
                continue
            record = load_record(plain(log.record))
            if scope is None or record.scope == scope:
                records.append(record)
        return records

    def _write_now(self, record: ConversationRecord, new_entries: list[ConversationEntry],
                   expected: str | None) -> ConversationLog:
        cid = record.conversation_id
        fork = record.forked_from is not None and expected is None
        with self._writing(cid) as session:
            log = fold_events(session.events) if session is not None else ConversationLog()
            if log.revision != expected:
                raise _conflict(cid, expected, log.revision, "the stored revision differs")
            if session is None or fork:
                session = self._start(cid, record, session)
                log = fold_events(session.events)
            known = set(log.entries) | {entry.id for entry in new_entries}
            if record.head_id is not None and record.head_id not in known:
                raise _conflict(cid, expected, log.revision,
                                f"the head {record.head_id!r} is in no entry of the log")
            self._append_turn(session, log, record, new_entries, fork)
            log = fold_events(session.events)
            created = session.created
            try:
                self._finish(session)
            except (PersistenceError, SessionExistsError):
                if not created:
                    raise
                # Another writer created the conversation between our look and our
                # first flush: the store refused ours.
                raise _conflict(cid, expected, None, "another writer created it meanwhile"
                                ) from None
        return log

    @contextmanager
    def _writing(self, cid: str) -> Iterator[Session | None]:
        """The conversation's session, opened under its writer lock (``None`` when
        nothing is stored): released (its appends flushed) by :meth:`_finish`, or
        discarded, nothing of it written, when the block raises."""
        session = self._acquire(cid)
        self._current = session
        try:
            yield session
        except BaseException:
            current = self._current
            if current is not None and self.store.get(cid) is current:
                self.store.discard(current)
            raise

    def _finish(self, session: Session) -> None:
        self.store.release(session)
        self._current = None

    def _start(self, cid: str, record: ConversationRecord, tombstoned: Session | None
               ) -> Session:
        """The session of a conversation not stored (or deleted): a fork of the source's
        stored log (``DurableStore.fork``, whose copy holds the entries the fork's head
        reaches) for a fork, else a new session."""
        if tombstoned is not None:  # deleted, its session left: removed, then made anew
            self.store.release(tombstoned)
            self._current = None
            self.store.delete(cid, rule=DELETE_RULE)
        if record.forked_from is None:
            session = self.store.create(cid)
        else:
            try:
                source = self.store.read_session(record.forked_from)
            except PersistenceError:
                raise _conflict(cid, None, None, f"the conversation it forks, "
                                f"{record.forked_from!r}, is no longer stored") from None
            session = self.store.fork(source, child_id=cid)
        self._current = session
        return session

    def _append_turn(self, session: Session, log: ConversationLog,
                     record: ConversationRecord, new_entries: list[ConversationEntry],
                     fork: bool) -> None:
        turn = log.turns + 1
        first = new_entries[0].message if new_entries else None
        source: dict[str, str] = (
            {"kind": "user"} if isinstance(first, ModelRequest)
            and any(isinstance(p, UserPromptPart) for p in first.parts)
            else {"kind": "plugin", "plugin": PLUGIN})
        session.append("turn/start", {"turn": turn,
                                      "trigger": {"kind": "message", "source": source}})
        # The system prompt parts of the history these entries continue (pydantic-ai
        # sends every one of them with each request).
        before = log.chain(new_entries[0].parent_id) if new_entries else []
        prompts = system_prompts(plain(log.entries[i][1]) for i in before)
        writer = MessageWriter(session, turn, pending_calls(session), prompts)
        for entry in new_entries:
            session.append(ENTRY, {"entryId": entry.id, "parentId": entry.parent_id,
                                   "message": dump_message(entry.message)})
            writer.write(entry.message)
        writer.close_step()
        # The derived conversation is the stored head's unless a fork copied another's,
        # or a deleted conversation's session is being reused.
        previous = log.head_id()
        in_step = not fork and (log.record is not None or not log.entries)
        extends = in_step and (new_entries[0].parent_id == previous if new_entries
                               else record.head_id == previous)
        if not extends or not writer.complete:
            # A branch, a rewrite or a fork: the derived conversation is made the
            # history's, which the appends alone would not give.
            grown = fold_events(session.events)
            history = [load_message(plain(grown.entries[i][1]))
                       for i in grown.chain(record.head_id)]
            resurface(session, history_messages(session, history), turn=turn)
        session.append(RECORD, {"revision": record.revision, "record": dump_record(record)})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    def _delete_now(self, cid: str, expected: str) -> None:
        with self._writing(cid) as session:
            log = fold_events(session.events) if session is not None else ConversationLog()
            if session is None or log.revision != expected:
                raise _conflict(cid, expected, log.revision, "the stored revision differs")
            turn = log.turns + 1
            session.append("turn/start", {"turn": turn, "trigger": {
                "kind": "message", "source": {"kind": "plugin", "plugin": PLUGIN}}})
            session.append(DELETED, {"revision": expected})
            end = session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            self._finish(session)
        # The deletion is durable: the session itself goes too, unless another writer
        # wrote it since (it then holds a conversation made anew).
        try:
            tail = self.store.tail(cid, 1)
            if tail and tail[-1].seq == end.seq:
                self.store.delete(cid, rule=DELETE_RULE)
        except (PersistenceError, SessionLockedError):
            pass

    def _acquire(self, cid: str) -> Session | None:
        """The stored session, opened (its writer lock taken), or ``None`` when nothing
        is stored; another writer's hold is waited out up to ``lock_timeout``."""
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        reopens = 0
        while True:
            try:
                return self.store.open(cid)
            except (SessionLockedError, SessionExistsError):
                if time.monotonic() >= deadline:
                    raise
            except PersistenceError:
                if self.store.backend.tail_lines(cid, 0) is None:
                    return None
                # Stored: another writer appended between the store's read of the log
                # and its taking of the lock ("open it again"), or a log that cannot be
                # opened, which a few more tries do not hide.
                reopens += 1
                if reopens > _REOPENS or time.monotonic() >= deadline:
                    raise
                continue
            time.sleep(delay)  # another writer holds it: it releases when it is done
            delay = min(delay * 2, 0.1)


def _conflict(cid: str, expected: str | None, stored: str | None, reason: str
              ) -> ConversationRevisionConflict:
    return ConversationRevisionConflict(cid, expected=expected, stored=stored, reason=reason)
