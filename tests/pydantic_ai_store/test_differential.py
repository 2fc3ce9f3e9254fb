"""``DshConversationStore`` against pydantic-ai's own ``InMemoryConversationStore``:
the same random sequences of saves (new, extended, rewritten, stale), loads, branches,
forks, lists and deletes run on both, and every result, or the error it raised, is
compared.

What is legitimately different, and only that, is normalised (:class:`Pairing`):
- entry ids and revisions, minted by pydantic-ai's ``uuid7`` in each store's run: paired
  one to one as they appear (the same position in the same result), and every later
  appearance must match its pair;
- ``updated_at``, each store's own clock: not compared; the list order, which it sets,
  is compared wherever the in-memory store's stamps are distinct (ties sort either way
  in either store), and ours is checked to be newest first;
- the text of a ``ConversationConflict``: the one our primitives raise under the lock
  (``ConversationRevisionConflict``, a subclass) adds the reason and the revisions to
  pydantic-ai's message; the ABC's own early checks raise pydantic-ai's.
"""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage, RunUsage

from dsh_session_core import open_store
from dsh_session_pydantic_ai import DshConversationStore

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

CIDS = ("c1", "c2")
#: What a fork is named: mostly a new id, sometimes one taken (a conflict).
FORKS = ("f1", "f2", "c2")
SCOPES = (None, "alice", "bob")
T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_call_id = st.sampled_from(["k1", "k2", "k3"])


@st.composite
def _message(draw: st.DrawFn) -> ModelMessage:
    kind = draw(st.sampled_from(["user", "text", "call", "return"]))
    if kind == "user":
        return ModelRequest(parts=[UserPromptPart(content=draw(_text), timestamp=T0)],
                            timestamp=T0)
    if kind == "return":
        return ModelRequest(parts=[ToolReturnPart(
            tool_name="f", content=draw(_text), tool_call_id=draw(_call_id), timestamp=T0)],
            timestamp=T0)
    parts: list[Any] = [TextPart(content=draw(_text))]
    if kind == "call":
        parts.append(ToolCallPart(tool_name="f", args={"x": draw(st.integers(0, 9))},
                                  tool_call_id=draw(_call_id)))
    return ModelResponse(parts=parts, timestamp=T0, model_name="m",
                         usage=RequestUsage(input_tokens=draw(st.integers(0, 5)),
                                            output_tokens=draw(st.integers(0, 5))))


_messages = st.lists(_message(), max_size=3)
_cid = st.sampled_from(CIDS)
_scope = st.sampled_from(SCOPES)
_point = st.one_of(st.tuples(st.just("at"), st.integers(0, 4)),
                   st.tuples(st.just("entry"), st.integers(0, 2), st.integers(0, 4)))
_new = st.tuples(st.just("new"), _cid, _messages, _scope, st.integers(0, 3))
# A conversation held (an index: perhaps stale), else the one loaded now.
_held = st.integers(0, 9)
_extend = st.tuples(st.just("extend"), _cid, _held, _messages, _scope)
# Saves drawn more often than the rest: the other operations need conversations.
_op = st.one_of(
    _new, _new, _extend, _extend,
    st.tuples(st.just("load"), _cid, st.none() | st.integers(0, 4), _scope),
    st.tuples(st.just("rewrite"), _cid, _held, st.integers(0, 4), _messages),
    st.tuples(st.just("branch"), _cid, _point, st.integers(0, 8), _scope),
    st.tuples(st.just("fork"), _cid, st.none() | _point, st.sampled_from(FORKS), _scope,
              st.none() | _scope),
    st.tuples(st.just("list"), _scope, st.none() | st.integers(0, 3)),
    st.tuples(st.just("delete"), _cid, _scope),
)


class Pairing:
    """The one-to-one pairing of the ids (and revisions) each store minted."""

    def __init__(self) -> None:
        self.ours: dict[str, str] = {}
        self.theirs: dict[str, str] = {}

    def pair(self, ours: str | None, theirs: str | None) -> None:
        assert (ours is None) == (theirs is None), (ours, theirs)
        if ours is None or theirs is None:
            return
        if ours in self.ours or theirs in self.theirs:
            assert self.ours.get(ours) == theirs, (ours, theirs, self.ours.get(ours))
            return
        self.ours[ours], self.theirs[theirs] = theirs, ours

    def entries(self, ours: list[ConversationEntry] | None,
                theirs: list[ConversationEntry] | None) -> None:
        assert (ours is None) == (theirs is None)
        if ours is None or theirs is None:
            return
        assert [e.message for e in ours] == [e.message for e in theirs]
        for a, b in zip(ours, theirs, strict=True):
            self.pair(a.id, b.id)
            self.pair(a.parent_id, b.parent_id)
            assert a.kind == b.kind

    def conversation(self, ours: Conversation | None, theirs: Conversation | None) -> None:
        assert (ours is None) == (theirs is None)
        if ours is None or theirs is None:
            return
        assert ours.messages == theirs.messages
        assert ours.usage == theirs.usage
        assert ours.conversation_id == theirs.conversation_id
        assert ours.deferred_tool_requests == theirs.deferred_tool_requests
        assert ours.new_message_index == theirs.new_message_index
        self.pair(ours.revision, theirs.revision)

    def record(self, ours: ConversationRecord, theirs: ConversationRecord) -> None:
        for name in ("conversation_id", "usage", "deferred_tool_requests", "scope",
                     "forked_from", "format_version"):
            assert getattr(ours, name) == getattr(theirs, name), name
        self.pair(ours.head_id, theirs.head_id)
        self.pair(ours.forked_at, theirs.forked_at)
        self.pair(ours.revision, theirs.revision)
        assert len(ours.branches) == len(theirs.branches)
        for a, b in zip(ours.branches, theirs.branches, strict=True):
            self.pair(a, b)

    def records(self, ours: list[ConversationRecord], theirs: list[ConversationRecord]
                ) -> None:
        assert len(ours) == len(theirs)
        stamps = [r.updated_at for r in ours]
        assert stamps == sorted(stamps, reverse=True)
        if len({r.updated_at for r in theirs}) < len(theirs):
            # Equal stamps: their order, and with a limit the ones kept, are either.
            ours = sorted(ours, key=lambda r: r.conversation_id)
            theirs = sorted(theirs, key=lambda r: r.conversation_id)
            if [r.conversation_id for r in ours] != [r.conversation_id for r in theirs]:
                return
        for a, b in zip(ours, theirs, strict=True):
            self.record(a, b)


def _outcome(exc: BaseException) -> tuple[str, str]:
    """What an error says, comparably (see the module's doc)."""
    if isinstance(exc, ConversationConflict):
        return ("conflict", exc.conversation_id)
    if isinstance(exc, UserError):
        return ("user", str(exc))
    raise exc


@dataclass
class Pair:
    """One conversation object per store, the same conversation."""

    ours: Conversation
    theirs: Conversation


class Run:
    """The two stores, the conversations held, and the pairing."""

    def __init__(self, ours: DshConversationStore) -> None:
        self.stores: tuple[ConversationStore, ConversationStore] = (
            ours, InMemoryConversationStore())
        self.held: list[Pair] = []
        self.pairing = Pairing()
        self.current = ""

    async def both(self, call: Any) -> tuple[Any, Any] | None:
        """``call(store, side)`` on each store: their results, or ``None`` once their
        errors were compared."""
        results: list[Any] = []
        errors: list[tuple[str, str] | None] = []
        for side, store in enumerate(self.stores):
            try:
                results.append(await call(store, side))
                errors.append(None)
            except (ConversationConflict, UserError) as exc:
                results.append(None)
                errors.append(_outcome(exc))
        assert errors[0] == errors[1], errors
        # What each operation came to (pytest --hypothesis-show-statistics).
        if currently_in_test_context():
            event(f"{self.current}: {'ok' if errors[0] is None else errors[0][0]}"
                  + ("" if errors[0] is None else errors[0][1][:30]))
        return None if errors[0] is not None else (results[0], results[1])

    def hold(self, got: tuple[Any, Any] | None) -> None:
        if got is not None and got[0] is not None:
            self.held.append(Pair(got[0], got[1]))

    async def point(self, cid: str, point: tuple[Any, ...]) -> tuple[dict[str, Any],
                                                                      dict[str, Any]]:
        """The keyword arguments of a branch or fork point, per store: ``at``, or the
        entry at a position of the current history (line 0) or of a branch left."""
        if point[0] == "at":
            return {"at": point[1]}, {"at": point[1]}
        _, line, position = point
        chosen: list[str] = []
        for store in self.stores:
            record = await store.read_record(cid)
            entry_id = "nope"
            if record is not None:
                tips = [record.head_id, *record.branches]
                if line < len(tips):
                    history = await store.read_history(tips[line])
                    if position < len(history):
                        entry_id = history[position].id
            chosen.append(entry_id)
        assert (chosen[0] == "nope") == (chosen[1] == "nope")
        if chosen[0] != "nope":
            self.pairing.pair(*chosen)
        return {"from_entry": chosen[0]}, {"from_entry": chosen[1]}

    async def step(self, op: tuple[Any, ...]) -> None:
        name = self.current = op[0]
        if name == "new":
            _, cid, messages, scope, requests = op
            got = await self.both(lambda store, _side: store.save(
                Conversation(conversation_id=cid, messages=list(messages),
                             usage=RunUsage(requests=requests)), scope=scope))
            if got is not None:
                self.pairing.entries(*got)
        elif name == "load":
            _, cid, limit, scope = op
            got = await self.both(lambda store, _side: store.load(cid, limit=limit,
                                                                   scope=scope))
            if got is not None:
                self.pairing.conversation(*got)
                self.hold(got)
            entries = await self.both(lambda store, _side: store.load_entries(
                cid, limit=limit, scope=scope))
            if entries is not None:
                self.pairing.entries(*entries)
        elif name in ("extend", "rewrite"):
            _, cid, held, *change = op
            if held < len(self.held):
                pair = self.held[held]
            else:
                loaded = await self.both(lambda store, _side: store.load(cid))
                if loaded is None or loaded[0] is None:
                    return
                self.pairing.conversation(*loaded)
                pair = Pair(*loaded)
                self.held.append(pair)
            for conversation in (pair.ours, pair.theirs):
                if name == "extend":
                    conversation.messages.extend(change[0])
                else:  # a new list: the save compares it with what is stored
                    conversation.messages = [*conversation.messages[:change[0]], *change[1]]
            scope = change[1] if name == "extend" else None
            got = await self.both(lambda store, side: store.save(
                (pair.ours, pair.theirs)[side], scope=scope))
            if got is not None:
                self.pairing.entries(*got)
            self.pairing.pair(pair.ours.revision, pair.theirs.revision)
        elif name == "branch":
            _, cid, point, held, scope = op
            ours_at, theirs_at = await self.point(cid, point)
            revisions: tuple[str | None, str | None] = (None, None)
            if held < len(self.held):
                revisions = (self.held[held].ours.revision, self.held[held].theirs.revision)
            else:
                current = await self.both(lambda store, _side: store.load(cid))
                if current is not None and current[0] is not None:
                    revisions = (current[0].revision, current[1].revision)
            got = await self.both(lambda store, side: store.branch(
                cid, **(ours_at, theirs_at)[side], expected_revision=revisions[side],
                scope=scope))
            if got is not None:
                self.pairing.conversation(*got)
                self.hold(got)
        elif name == "fork":
            _, cid, point, new_cid, scope, source_scope = op
            at = ({}, {}) if point is None else await self.point(cid, point)
            got = await self.both(lambda store, side: store.fork(
                cid, **at[side], new_conversation_id=new_cid, scope=scope,
                source_scope=source_scope))
            if got is not None:
                self.pairing.conversation(*got)
                self.hold(got)
        elif name == "list":
            _, scope, limit = op
            got = await self.both(lambda store, _side: store.list_conversations(
                scope=scope, limit=limit))
            assert got is not None
            self.pairing.records(*got)
        elif name == "delete":
            _, cid, scope = op
            await self.both(lambda store, _side: store.delete(cid, scope=scope))

    async def check_all(self) -> None:
        """Every conversation, as each store has it at the end."""
        self.current = "final"
        for cid in (*CIDS, *FORKS):
            got = await self.both(lambda store, _side, cid=cid: store.load(cid))
            assert got is not None
            self.pairing.conversation(*got)
        got = await self.both(lambda store, _side: store.list_conversations())
        assert got is not None
        self.pairing.records(*got)


def _run(url: str, ops: list[tuple[Any, ...]]) -> None:
    async def main() -> None:
        with open_store(url) as store:
            for header in store.stored():  # the previous example's
                store.delete(header.id)
            run = Run(DshConversationStore(store))
            for op in ops:
                await run.step(op)
            await run.check_all()
            # What a fresh store object reads is what this one read.
        with open_store(url) as store:
            fresh = DshConversationStore(store)
            for cid in (*CIDS, *FORKS):
                a, b = await fresh.load(cid), await run.stores[1].load(cid)
                run.pairing.conversation(a, b)

    asyncio.run(main())


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=6, max_size=30))
def test_same_results_as_in_memory(store_url: str, ops: list[tuple[Any, ...]]) -> None:
    """Every result of every operation is the in-memory store's, on each backend
    (one store per test; each example starts by deleting what the last one stored)."""
    _run(store_url, ops)


def test_a_sequence_of_every_operation(store_url: str) -> None:
    """One fixed sequence through each operation, so each kind runs whatever hypothesis
    draws: save, extend, stale save, rewrite (a branch), branch back to the branch left,
    fork at an entry, list by scope, delete of the source (the fork stays whole)."""
    say = ModelRequest(parts=[UserPromptPart(content="hi", timestamp=T0)], timestamp=T0)
    answer = ModelResponse(parts=[TextPart(content="yes"),
                                  ToolCallPart(tool_name="f", args={}, tool_call_id="k1")],
                           timestamp=T0)
    back = ModelRequest(parts=[ToolReturnPart(tool_name="f", content="1", tool_call_id="k1",
                                              timestamp=T0)], timestamp=T0)
    _run(store_url, [
        ("new", "c1", [say, answer], "alice", 1),
        ("load", "c1", None, None),
        ("load", "c1", None, "alice"),
        ("extend", "c1", 0, [back], None),
        ("extend", "c1", 1, [say], None),  # stale: a conflict on both
        ("rewrite", "c1", 9, 1, [answer]),
        ("branch", "c1", ("entry", 1, 2), 9, "alice"),
        ("fork", "c1", ("entry", 0, 1), "c2", "bob", None),
        ("list", "alice", None),
        ("list", None, 1),
        ("delete", "c1", "bob"),  # another scope: left as it is
        ("delete", "c1", None),
        ("load", "c2", None, "bob"),
    ])
