"""``DshSession``: the OpenAI Agents SDK's ``Session`` protocol on a dsh-session store.

This module owns the mapping from SDK items to dsh events (:func:`record_items`), the
item view as a fold of the log (:func:`fold_items`), and the per-operation open, write,
flush and release of the session (:class:`DshSession`).

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
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

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

from .events import AgentsClear, AgentsItem, AgentsPop

_T = TypeVar("_T")

#: How long an operation waits for another writer (another instance on another store
#: object, or another process) to release the session before it gives up.
DEFAULT_LOCK_TIMEOUT = 30.0


# --- the item view: a fold of the log ---------------------------------------------------


def fold_items(events: Iterable[Event]) -> list[tuple[int, Any]]:
    """The SDK's item list of a log, as ``(seq of its agents/item, item)`` pairs: every
    ``agents/item`` in order, less what ``agents/pop`` took off the end and what
    ``agents/clear`` emptied. The items are fresh plain JSON values."""
    items: list[tuple[int, Any]] = []
    for event in events:
        if isinstance(event, AgentsItem):
            items.append((event.seq, to_wire(event.data)["item"]))
        elif isinstance(event, AgentsPop):
            if items and items[-1][0] == event.data.item_seq:
                items.pop()
        elif isinstance(event, AgentsClear):
            items.clear()
    return items


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


def _open_calls(session: Session) -> dict[str, int]:
    """The seqs of the session's ``tool/call`` events that no ``tool/result`` answers
    yet, by call id."""
    calls: dict[str, int] = {}
    for event in session.events:
        if event.type == "tool/call":
            calls[event.data.call_id] = event.seq
        elif event.type == "tool/result":
            calls.pop(event.data.call_id, None)
    return calls


def record_items(session: Session, items: Sequence[Any]) -> None:
    """Append ``items`` to ``session``: each as ``agents/item``, followed by the typed
    event recording it, inside turns (a new turn at each user message that follows
    model output). The turns are closed when this returns."""
    calls = _open_calls(session)
    groups: list[list[Any]] = []
    model_output = False
    for item in items:
        user = _kind(item) == "user"
        if not groups or (user and model_output):
            groups.append([])
            model_output = False
        groups[-1].append(item)
        model_output = model_output or not user
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
                        step.end()
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


def _step_calls(step: Any) -> list[Any]:
    """The tool calls the builder logged in ``step`` (its own bookkeeping)."""
    return list(getattr(step, "_calls", {}).values())


# --- the session --------------------------------------------------------------------------


#: One lock per stored session in this process: keyed by the store's identity (its
#: folder, database file or server: two store objects over one store share it) and the
#: session id. The operations of every instance take turns, whichever store object,
#: thread and event loop each runs on, so none finds the session held by another, and
#: two instances never both create one new session (the second would write over the
#: first's first events). A thread lock, taken without blocking the loop. Across
#: processes the stores' writer locks decide.
_LOCKS: dict[tuple[object, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextlib.asynccontextmanager
async def _holding(lock: threading.Lock) -> AsyncIterator[None]:
    """Hold ``lock``, polling for it (1 ms, growing to 20 ms) while another holds it."""
    delay = 0.001
    while not lock.acquire(blocking=False):
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.02)
    try:
        yield
    finally:
        lock.release()


class DshSession(SessionABC):
    """An OpenAI Agents SDK session stored as a dsh-session log.

    :param session_id: the dsh session id (one log per SDK session).
    :param store: a store URL (``"sqlite:///agents.db"``, a folder, ``postgresql://...``;
        opened here and closed by :meth:`close`), a :class:`DurableStore` of the caller's
        (left open), or ``None`` for the default store.
    :param session_settings: the SDK's settings (``limit``), as ``SessionSettings`` or
        its dict.
    :param lock_timeout: seconds an operation waits for another writer of the session
        (another store object or process) before raising ``SessionLockedError``.

    Each operation opens the session, writes, flushes and releases it, so instances on
    one store and id, in one process or many, share its history and take turns writing.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: DurableStore | str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
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

    # --- the protocol -----------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The items, oldest first; the last ``limit`` (or ``session_settings.limit``)
        when given: ``0`` gives none, a negative limit all (as ``SQLiteSession``)."""
        session_limit = resolve_session_limit(limit, self.session_settings)
        items = [item for _, item in await self._run(lambda s: fold_items(s.events), False)]
        if session_limit is not None and session_limit >= 0:
            items = items[-session_limit:] if session_limit else []
        return cast(list[TResponseInputItem], items)

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append the items (durable when this returns)."""
        if not items:
            return
        batch = list(items)
        await self._run(lambda s: record_items(s, batch), True)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Take the most recent item off the view and return it (``None`` when empty):
        an ``agents/pop`` event, durable when this returns."""

        def pop(session: Session) -> Any:
            items = fold_items(session.events)
            if not items:
                return None
            seq, item = items[-1]
            session.append("agents/pop", {"itemSeq": seq})
            return item

        return cast("TResponseInputItem | None", await self._run(pop, False))

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Empty the view: an ``agents/clear`` event, durable when this returns (the log
        keeps every earlier event)."""

        def clear(session: Session) -> None:
            items = fold_items(session.events)
            if items:
                session.append("agents/clear", {"items": len(items)})

        await self._run(clear, False)

    # --- the store -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if this instance opened it from a URL."""
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        """:meth:`close`, awaited."""
        if self._owns_store:
            await self.store.aclose()

    def _lock(self) -> threading.Lock:
        identity = self.store.backend.store_identity()
        key = (identity if identity is not None else id(self.store), self.session_id)
        with _LOCKS_GUARD:
            lock = _LOCKS.get(key)
            if lock is None:
                lock = _LOCKS[key] = threading.Lock()
            return lock

    async def _acquire(self, create: bool) -> tuple[Session | None, bool]:
        """The live session and whether this operation opened it (and must release it);
        ``(None, False)`` when nothing is stored and ``create`` is false."""
        live = self.store.get(self.session_id)
        if live is not None:
            return live, False
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                try:
                    return await self.store.aopen(self.session_id), True
                except SessionLockedError:
                    raise
                except PersistenceError:
                    stored = {h.id for h in await self.store.astored()}
                    if self.session_id in stored:
                        raise
                    if not create:
                        return None, False
                    return await self.store.acreate(self.session_id), True
            except SessionLockedError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)

    async def _run(self, operation: Callable[[Session], _T], create: bool) -> _T:
        """Run ``operation`` on the live session, then flush (and release what it opened).
        With nothing stored and ``create`` false, run it on an empty session."""
        async with _holding(self._lock()):
            session, opened = await self._acquire(create)
            if session is None:
                return operation(Session(self.session_id))
            try:
                return operation(session)
            finally:
                if opened:
                    await self.store.arelease(session)
                else:
                    await self.store.aflush(session)
