"""``DshSession``: the OpenAI Agents SDK's ``Session`` protocol on a dsh-session store.

This module owns the mapping from SDK items to dsh events (:func:`record_items`), the
item view as a fold of the log (:func:`fold_items`), and the session (:class:`DshSession`):
by default each operation opens, writes, flushes and releases it; with ``keep_open`` the
first operation opens it and keeps it until ``close()``, each later one folding in only
the events appended since the last (:class:`_LogIndex`).

Each ``add_items`` call is written as one or more turns: the item itself first, verbatim,
as ``agents/item``, then the typed event that records it (``user/message``,
``assistant/message``, ``tool/call``, ``tool/result``). ``pop_item`` and
``clear_session`` append ``agents/pop`` and ``agents/clear``: nothing is ever deleted.
"""

from __future__ import annotations

__all__ = ["DshSession", "fold_items", "record_items"]

import asyncio
import contextlib
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from typing import Any, TypeVar, cast

import msgspec
from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)
from agents.run_context import RunContextWrapper

from dsh_session_core import (
    DurableStore,
    Event,
    PersistenceError,
    Session,
    SessionLockedError,
    TextBlock,
    ToolCallBlock,
    open_store,
    to_wire,
)
from dsh_session_core.events import ToolCall, ToolResult

from .events import AgentsClear, AgentsItem, AgentsPop

_T = TypeVar("_T")

#: How long an operation waits for another writer (another instance on another store
#: object, or another process) to release the session before it gives up.
DEFAULT_LOCK_TIMEOUT = 30.0


# --- the item view: a fold of the log ---------------------------------------------------


def _advance(events: Iterable[Event], items: list[AgentsItem], calls: dict[str, int]) -> None:
    """Fold ``events`` into the item view (``items``: the ``agents/item`` events it
    holds) and the open tool calls (``calls``: the seq of each ``tool/call`` no
    ``tool/result`` answers yet, by call id)."""
    for event in events:  # by exact class: a reload folds every event of the log
        cls = event.__class__
        if cls is AgentsItem:
            items.append(event)  # type: ignore[arg-type]  # its class says so
        elif cls is ToolCall:
            calls[event.data.call_id] = event.seq
        elif cls is ToolResult:
            calls.pop(event.data.call_id, None)
        elif cls is AgentsPop:
            if items and items[-1].seq == event.data.item_seq:
                items.pop()
        elif cls is AgentsClear:
            items.clear()


def _item(event: AgentsItem) -> Any:
    """The item an ``agents/item`` holds, as a fresh plain JSON value."""
    return to_wire(event.data)["item"]


def _items(events: Sequence[AgentsItem]) -> list[Any]:
    """The items of ``events``, as fresh plain JSON values: in one encode and one decode
    of the list, where an :func:`_item` each costs two calls an item."""
    return cast(list[Any], to_wire([event.data.item for event in events]))


#: The event types the item view is a fold of: a reload of the view reads only these.
VIEW_TYPES = ("agents/item", "agents/pop", "agents/clear")
#: Their lines, decoded in one call into the plugin's own event classes: every payload
#: checked against its schema, each item coming out as a fresh plain JSON value.
_VIEW_DECODER = msgspec.json.Decoder(list[AgentsItem | AgentsPop | AgentsClear])


def stored_view(lines: list[bytes]) -> list[Any] | None:
    """The item view of a stored log from the lines of its ``agents/item``,
    ``agents/pop`` and ``agents/clear`` events (:meth:`DurableStore.read_lines`), or
    ``None`` when a line does not decode into those classes (a line of another type or
    layout, one msgspec cannot read): the caller then loads the log.

    The items are read once, by msgspec, straight into the values returned: a session
    loaded whole decodes each item, freezes it for the log, then copies it out again."""
    if not lines:
        return []
    try:
        events = _VIEW_DECODER.decode(b"[" + b",".join(lines) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    items: list[AgentsItem] = []
    _advance(events, items, {})
    return [event.data.item for event in items]


def fold_items(events: Iterable[Event]) -> list[tuple[int, Any]]:
    """The SDK's item list of a log, as ``(seq of its agents/item, item)`` pairs: every
    ``agents/item`` in order, less what ``agents/pop`` took off the end and what
    ``agents/clear`` emptied. The items are fresh plain JSON values."""
    items: list[AgentsItem] = []
    _advance(events, items, {})
    return list(zip([event.seq for event in items], _items(items), strict=True))


class _LogIndex:
    """What the operations read of one session's log, the item view and the open tool
    calls, brought up to date from the events appended since it last looked
    (:meth:`update`): on a session kept open, an operation costs what it appends, not
    the length of the log."""

    __slots__ = ("calls", "items", "scanned", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.scanned = 0
        self.items: list[AgentsItem] = []
        self.calls: dict[str, int] = {}

    def reset(self) -> None:
        """Forget what was folded: the next :meth:`update` folds the whole log."""
        self.scanned = 0
        self.items.clear()
        self.calls.clear()

    def update(self) -> _LogIndex:
        """Fold in the events appended since the last update (by anyone)."""
        events = self.session.events
        end = len(events)
        if end > self.scanned:
            _advance(events[self.scanned:end], self.items, self.calls)
            self.scanned = end
        return self


# --- the mapping: items to typed events ---------------------------------------------------


def _text_blocks(content: Any) -> list[TextBlock]:
    """The text of a message's or an output's content: a string, or the text parts of a
    list (``input_text``, ``output_text``, ``refusal``); other parts are kept in the
    ``agents/item`` only."""
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[TextBlock] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in ("input_text", "output_text", "text") and isinstance(
                part.get("text"), str
            ):
                blocks.append(TextBlock(text=part["text"]))
            elif kind == "refusal" and isinstance(part.get("refusal"), str):
                blocks.append(TextBlock(text=part["refusal"]))
    return blocks


def _kind(item: Any) -> str:
    """What an item is recorded as: ``user``, ``assistant``, ``call``, ``output``, or
    ``other`` (kept as ``agents/item`` only)."""
    if not isinstance(item, dict):
        return "other"
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message"):
        if role == "user":
            return "user"
        if role == "assistant":
            return "assistant"
        return "other"
    if (kind == "function_call" and isinstance(item.get("call_id"), str)
            and isinstance(item.get("name"), str) and isinstance(item.get("arguments"), str)):
        return "call"
    if kind == "function_call_output" and isinstance(item.get("call_id"), str):
        return "output"
    return "other"


def _check_items(session: Session, items: Sequence[Any]) -> None:
    """Refuse a batch holding an item the log cannot keep (a value JSON cannot carry,
    nesting too deep) before any of it is appended: each item is appended as
    ``agents/item`` to a scratch session with the same event types and rules, which
    raises what the real append would (:class:`~dsh_session_core.errors.NotJsonError`,
    ``TooDeepError``)."""
    scratch = Session(session.id, registry=session.registry, strict=session.strict,
                      foreign_types=session.foreign_types)
    for item in items:
        scratch.append("agents/item", {"item": item})


def record_items(session: Session, items: Sequence[Any]) -> None:
    """Append ``items`` to ``session``: each as ``agents/item``, followed by the typed
    event recording it, inside turns (a new turn at each user message that follows
    model output). The turns are closed when this returns.

    A batch holding an item the log cannot keep (a value JSON cannot carry, nesting too
    deep) is refused whole, before any of it is appended."""
    _record(_LogIndex(session).update(), items)


def _record(index: _LogIndex, items: Sequence[Any]) -> None:
    """:func:`record_items` on an up-to-date index of the session's log, which it
    leaves up to date."""
    session = index.session
    _check_items(session, items)
    calls = index.calls  # kept as the log's own fold would: update() agrees after
    groups: list[list[Any]] = []
    model_output = False
    for item in items:
        user = _kind(item) == "user"
        if not groups or (user and model_output):
            groups.append([])
            model_output = False
        groups[-1].append(item)
        model_output = model_output or not user
    try:
        for group in groups:
            with session.turn() as turn:
                step = None
                answered = False  # the open step holds a tool result
                for item in group:
                    session.append("agents/item", {"item": item})
                    kind = _kind(item)
                    if kind == "user":
                        blocks = _text_blocks(item.get("content"))
                        if blocks and step is None:
                            turn.user(blocks)
                        elif blocks:
                            turn.steer(blocks)
                        continue
                    if kind in ("assistant", "call") and (step is None or answered):
                        if step is not None:
                            step.end(answer=False)  # an output may come in a later batch
                        step, answered = turn.step(), False
                    if kind == "assistant":
                        assert step is not None
                        blocks = _text_blocks(item.get("content"))
                        if blocks:
                            step.assistant(blocks)
                    elif kind == "call":
                        assert step is not None
                        block = ToolCallBlock(id=item["call_id"], name=item["name"],
                                              arguments=item["arguments"])
                        step.assistant([block])
                        step.tool_call(block)
                        calls[block.id] = session.events[-1].seq
                    elif kind == "output":
                        call_id = item["call_id"]
                        seq = calls.pop(call_id, None)
                        if seq is None:
                            continue  # an output of no recorded call: kept as the item only
                        if step is None:
                            step, answered = turn.step(), False
                        output = item.get("output")
                        blocks = _text_blocks(output) if output is not None else []
                        if any(c.call_id == call_id for c in _step_calls(step)):
                            step.tool_result(call_id, blocks)
                        else:  # a call of an earlier add_items: answered by seq
                            session.append(
                                "tool/result",
                                {"turn": turn.number, "step": step.number, "callId": call_id,
                                 "content": [to_wire(b) for b in blocks], "isError": False},
                                surface_op="append", source_event_seqs=[seq],
                            )
                        answered = True
                if step is not None:
                    # A call the SDK is still running gets its output in a later batch
                    # (answered by seq, above): the builder must not answer it first.
                    step.end(answer=False)
    except BaseException:
        index.reset()  # what it kept of a half-appended batch: folded afresh next
        raise
    index.update()


def _step_calls(step: Any) -> list[Any]:
    """The tool calls the builder logged in ``step`` (its own bookkeeping)."""
    return list(getattr(step, "_calls", {}).values())


# --- the session --------------------------------------------------------------------------


class _Turns:
    """The lock the operations on one stored session take turns on, and how many hold
    it or wait for it (``users``): the entry leaves :data:`_LOCKS` when the last user
    lets go, so the table holds only the sessions in use."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


#: One lock per stored session in use in this process: keyed by the store's identity
#: (its folder, database file or server: two store objects over one store share it) and
#: the session id. The operations of every instance take turns, whichever store object,
#: thread and event loop each runs on, so none finds the session held by another, and
#: two instances never both create one new session (the second would write over the
#: first's first events). A thread lock, taken without blocking the loop. Across
#: processes the stores' writer locks decide. An entry is made by the first operation
#: that needs it and dropped by the last that leaves it (see :class:`_Turns`).
_LOCKS: dict[tuple[object, str], _Turns] = {}
_LOCKS_GUARD = threading.Lock()


def _join(key: tuple[object, str]) -> _Turns:
    """The entry of ``key``, made if need be, counting one more user."""
    with _LOCKS_GUARD:
        turns = _LOCKS.get(key)
        if turns is None:
            turns = _LOCKS[key] = _Turns()
        turns.users += 1
        return turns


def _leave(key: tuple[object, str], turns: _Turns) -> None:
    """One user fewer; the entry is dropped with its last user (no one holds its lock
    then, nor waits for it: the next user makes a new one)."""
    with _LOCKS_GUARD:
        turns.users -= 1
        if not turns.users and _LOCKS.get(key) is turns:
            del _LOCKS[key]


@contextlib.asynccontextmanager
async def _taking_turns(key: tuple[object, str]) -> AsyncIterator[None]:
    """Hold the lock of ``key``, polling for it (1 ms, growing to 20 ms) while another
    holds it (a cancelled wait leaves the table as it found it)."""
    turns = _join(key)
    try:
        delay = 0.001
        while not turns.lock.acquire(blocking=False):
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        try:
            yield
        finally:
            turns.lock.release()
    finally:
        _leave(key, turns)


@contextlib.contextmanager
def _taking_turns_now(key: tuple[object, str], timeout: float) -> Iterator[None]:
    """Hold the lock of ``key``, blocking this thread up to ``timeout`` seconds: for
    :meth:`DshSession.close`. On a thread running an event loop it does not wait (the
    holder may be a task of that very loop, which cannot run while this blocks).

    :raises RuntimeError: the lock was not had in time."""
    try:
        asyncio.get_running_loop()
        timeout = 0.0
    except RuntimeError:
        pass
    turns = _join(key)
    try:
        had = (turns.lock.acquire(timeout=timeout) if timeout > 0
               else turns.lock.acquire(blocking=False))
        if not had:
            msg = (f'an operation on session "{key[1]}" is still running: close() cannot '
                   f"wait for it on its event loop's thread; await aclose() instead")
            raise RuntimeError(msg)
        try:
            yield
        finally:
            turns.lock.release()
    finally:
        _leave(key, turns)


async def _settled(aw: Awaitable[_T], then: Callable[[_T], object] | None = None) -> _T:
    """Await ``aw`` to its end even when cancelled meanwhile: the work it waits for runs
    on in a thread regardless, and the caller's turn on the session must last as long.
    ``then`` gets its result first (also when cancelled); then a cancellation is raised.
    """
    task = asyncio.ensure_future(aw)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not task.cancelled() and task.exception() is None and then is not None:
            then(task.result())
        raise cancelled
    result = task.result()
    if then is not None:
        then(result)
    return result


class DshSession(SessionABC):
    """An OpenAI Agents SDK session stored as a dsh-session log.

    :param session_id: the dsh session id (one log per SDK session).
    :param store: a store URL (``"sqlite:///agents.db"``, a folder, ``postgresql://...``;
        opened here and closed by :meth:`close`), a :class:`DurableStore` of the caller's
        (left open), or ``None`` for the default store.
    :param session_settings: the SDK's settings (``limit``), as ``SessionSettings`` or
        its dict.
    :param lock_timeout: seconds a write waits for another writer of the session
        (another store object or process) before raising ``SessionLockedError``.
    :param keep_open: keep the session open between operations, as this store's live
        writer, until :meth:`close`: each operation then costs what it reads or appends,
        not the length of the log, and every other store object and process is refused
        writing the session meanwhile (``SessionLockedError`` after their
        ``lock_timeout``).

    By default each write opens the session, writes, flushes and releases it, so
    instances on one store and id, in one process or many, share its history and take
    turns writing; :meth:`get_items` reads the item view from what is stored, without
    opening the session (it waits for no writer). With ``keep_open``, the first
    operation opens the session (or creates it) and keeps it; instances on the same
    store object share it.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: DurableStore | str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        keep_open: bool = False,
    ) -> None:
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._owns_store = not isinstance(store, DurableStore)
        self.store: DurableStore = store if isinstance(store, DurableStore) else open_store(store)
        self.lock_timeout = lock_timeout
        self.keep_open = keep_open
        #: keep_open: the session this instance opened and holds, and its log's index.
        self._held: Session | None = None
        self._index: _LogIndex | None = None
        self._turns_key: tuple[object, str] | None = None
        #: The default mode: the session an operation opened and could not release.
        self._unreleased: Session | None = None
        self._store_closed = False

    # --- the protocol -----------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The items, oldest first; the last ``limit`` (or ``session_settings.limit``)
        when given: ``0`` gives none, a negative limit all (as ``SQLiteSession``)."""
        session_limit = resolve_session_limit(limit, self.session_settings)

        def last(items: list[_T]) -> list[_T]:
            if session_limit is not None and session_limit >= 0:
                return items[-session_limit:] if session_limit else []
            return items

        if not self.keep_open:
            stored = await self._stored_items()
            if stored is not None:
                return cast(list[TResponseInputItem], last(stored))
        return cast(list[TResponseInputItem],
                    await self._run(lambda index: _items(last(index.items)), False))

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append the items (durable when this returns). A batch holding an item the log
        cannot keep (not JSON) is refused whole: nothing of it is appended."""
        if not items:
            return
        batch = list(items)
        await self._run(lambda index: _record(index, batch), True)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Take the most recent item off the view and return it (``None`` when empty):
        an ``agents/pop`` event, durable when this returns."""

        def pop(index: _LogIndex) -> Any:
            if not index.items:
                return None
            event = index.items[-1]
            index.session.append("agents/pop", {"itemSeq": event.seq})
            index.update()
            return _item(event)

        return cast("TResponseInputItem | None", await self._run(pop, False))

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Empty the view: an ``agents/clear`` event, durable when this returns (the log
        keeps every earlier event)."""

        def clear(index: _LogIndex) -> None:
            if index.items:
                index.session.append("agents/clear", {"items": len(index.items)})
                index.update()

        await self._run(clear, False)

    # --- the store -----------------------------------------------------------------------

    def close(self) -> None:
        """Release the session this instance keeps open (``keep_open``), then close the
        store if this instance opened it from a URL. Safe to call again.

        :raises RuntimeError: on the thread of an event loop where an operation of this
            session is still running (await :meth:`aclose` there).
        """
        try:
            if self._held is not None:
                with _taking_turns_now(self._key(), self.lock_timeout):
                    held, self._held, self._index = self._held, None, None
                    if held is not None and self._live() is held:
                        self.store.release(held)
        finally:
            if self._owns_store and not self._store_closed:
                self._store_closed = True
                self.store.close()

    async def aclose(self) -> None:
        """:meth:`close`, awaited (it waits for a running operation of this session)."""
        try:
            if self._held is not None:
                async with _taking_turns(self._key()):
                    held, self._held, self._index = self._held, None, None
                    if held is not None and self._live() is held:
                        await _settled(self.store.arelease(held))
        finally:
            if self._owns_store and not self._store_closed:
                self._store_closed = True
                await self.store.aclose()

    def _live(self) -> Session | None:
        """The session live in the store (``None`` once the store is closed)."""
        if self.store.persistence.closed:
            return None
        return self.store.get(self.session_id)

    def _key(self) -> tuple[object, str]:
        key = self._turns_key
        if key is None:
            identity = self.store.backend.store_identity()
            key = self._turns_key = (
                identity if identity is not None else id(self.store), self.session_id)
        return key

    async def _stored_items(self) -> list[Any] | None:
        """The default mode's read: the item view of what is stored, from the lines of
        the view's events alone (:func:`stored_view`), without opening the session: no
        writer lock is taken, so a reader never waits for a writer; it sees what the
        writers have made durable. ``None`` when the session must be loaded instead:
        live in this store (held by a ``keep_open`` instance, or left unreleased by a
        failed write, buffered events included), or a line :func:`stored_view` cannot
        read."""
        async with _taking_turns(self._key()):
            if self.store.get(self.session_id) is not None:
                return None
            try:
                lines = await self.store.aread_lines(self.session_id, types=VIEW_TYPES)
            except PersistenceError:
                return []  # nothing stored: an empty view, as the load gives
            return stored_view(lines)

    async def _acquire(self, create: bool, hold: bool = False) -> tuple[Session | None, bool]:
        """The live session and whether this operation opened it (and must release it);
        ``(None, False)`` when nothing is stored and ``create`` is false. With ``hold``
        (``keep_open``), what it opens is this instance's to hold, even when the
        operation is cancelled while the store opens it."""
        live = self.store.get(self.session_id)
        if live is not None:
            return live, False
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                try:
                    return await self._opening(self.store.aopen(self.session_id), hold), True
                except SessionLockedError:
                    raise
                except PersistenceError:
                    stored = {h.id for h in await self.store.astored()}
                    if self.session_id in stored:
                        raise
                    if not create:
                        return None, False
                    return await self._opening(self.store.acreate(self.session_id),
                                               hold), True
            except SessionLockedError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)

    async def _opening(self, opening: Awaitable[Session], hold: bool) -> Session:
        """Await the store opening (or creating) the session; with ``hold``, to its end
        even when cancelled, the session then held (released by :meth:`close`)."""
        if not hold:
            return await opening
        return await _settled(opening, self._hold)

    def _hold(self, session: Session) -> None:
        self._held = session

    async def _run(self, operation: Callable[[_LogIndex], _T], create: bool) -> _T:
        """Run ``operation`` on the index of the live session, then flush (and release
        what it opened, unless ``keep_open``). With nothing stored and ``create`` false,
        run it on an empty session (``keep_open`` creates it: the first operation takes
        the session)."""
        async with _taking_turns(self._key()):
            if self.keep_open:
                return await self._run_held(operation)
            session, opened = await self._acquire(create)
            if session is None:
                return operation(_LogIndex(Session(self.session_id)))
            # One this instance opened and failed to release (its write failed, so it
            # stayed live with its batch buffered): this operation writes and releases it.
            opened = opened or session is self._unreleased
            try:
                return operation(_LogIndex(session).update())
            finally:
                if opened:
                    self._unreleased = session
                    await self.store.arelease(session)
                    self._unreleased = None
                else:
                    await self.store.aflush(session)

    async def _run_held(self, operation: Callable[[_LogIndex], _T]) -> _T:
        """``keep_open``: the live session (opened, or created, and held at the first
        operation; shared with the other instances of this store object), its index
        kept from one operation to the next. The operation and the flush run in one
        worker thread: one hop off the loop per operation, where ``aflush`` takes two."""
        session, _ = await self._acquire(True, hold=True)
        assert session is not None
        index = self._index
        if index is None or index.session is not session:
            index = self._index = _LogIndex(session)
        return await _settled(asyncio.to_thread(self._apply, operation, index))

    def _apply(self, operation: Callable[[_LogIndex], _T], index: _LogIndex) -> _T:
        """Run ``operation`` on ``index`` brought up to date, then flush its session."""
        try:
            return operation(index.update())
        finally:
            self.store.flush(index.session)
