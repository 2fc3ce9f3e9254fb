"""``DshCheckpointSaver`` against LangGraph's own ``SqliteSaver``: random small graphs
(an ``add_messages`` channel, a plain list channel, a counter), random runs (new
messages, ``interrupt()`` and ``interrupt_before`` resumed, forks from older
checkpoints by ``update_state`` and by replay), the same on both savers; then every
answer compared: ``get_tuple``, ``list`` and the graph's ``get_state_history`` and
``get_state``, each from a fresh saver too, which reads the thread's projection rows
(never folding its log) on every kind of store: JSONL, JSONL with zstd, SQLite,
PostgreSQL, memory, and an encrypted one. What each run mints is normalised: ids
(checkpoints, tasks, messages, interrupts: renamed by first appearance), channel
versions (``SqliteSaver``'s ``"<n>.<random>"`` against the integer ``n``) and times."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import operator
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from dsh_session_core import DurableStore, Keyring, MemoryBackend, open_store
from dsh_session_langgraph import DshCheckpointSaver, _deltas

THREAD = "t"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[str], operator.add]
    count: int


# Every message has its id: add_messages gives one to a message without, in place, while
# LangGraph may be serializing the same object as a pending write in another thread (its
# writes are stored asynchronously): what is stored would depend on the race.

def _mark(state: State) -> str:
    return f"{len(state.get('messages', []))}.{state.get('count', 0)}"


def _reply(state: State) -> dict[str, Any]:
    n = len(state.get("messages", []))
    return {"messages": [AIMessage(content=f"reply {n} " + "x" * (n % 5) * 40,
                                   id=f"reply-{_mark(state)}")]}


def _tool(state: State) -> dict[str, Any]:
    mark = _mark(state)
    call = {"name": "look", "args": {"at": mark}, "id": f"call-{mark}", "type": "tool_call"}
    return {"messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{mark}"),
                         ToolMessage(content=f"looked {mark}", tool_call_id=f"call-{mark}",
                                     id=f"tool-{mark}")]}


def _ask(state: State) -> dict[str, Any]:
    mark = _mark(state)
    answer = interrupt(f"question {mark}")
    return {"messages": [HumanMessage(content=f"answered {answer}", id=f"answer-{mark}")]}


def _edit(state: State) -> dict[str, Any]:
    """A value that does not extend the last: the first message replaced (same id)."""
    messages = state.get("messages", [])
    if not messages:
        return {"count": state.get("count", 0) + 1}
    first = messages[0]
    return {"messages": [HumanMessage(content=f"{first.content} (edited)", id=first.id)]}


def _remove(state: State) -> dict[str, Any]:
    messages = state.get("messages", [])
    if len(messages) < 2:
        return {"notes": ["nothing to remove"]}
    return {"messages": [RemoveMessage(id=messages[0].id or "")]}


def _note(state: State) -> dict[str, Any]:
    count = state.get("count", 0)
    return {"notes": [f"note {count}"], "count": count + 1}


NODES: dict[str, Any] = {  # name -> node (a function of the state)
    "reply": _reply, "tool": _tool, "ask": _ask, "edit": _edit, "remove": _remove,
    "note": _note}


def build(saver: BaseCheckpointSaver[Any], kinds: list[str], before: list[int]
          ) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A chain of nodes of ``kinds``, interrupted before those at ``before``."""
    builder = StateGraph(State)
    names = [f"{kind}{i}" for i, kind in enumerate(kinds)]
    for name, kind in zip(names, kinds, strict=True):
        builder.add_node(name, NODES[kind])
    for a, b in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver,
                           interrupt_before=[names[i] for i in before if i < len(names)])


# --- normalising what a run mints ----------------------------------------------------

_MINTED = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                     r"|\b[0-9a-f]{32}\b")
_DROPPED = frozenset({"ts", "created_at"})


def _version(v: Any) -> int:
    return int(str(v).split(".")[0])


def plain(value: Any, names: dict[str, str]) -> Any:
    """``value`` as plain data, each minted id renamed by its first appearance."""
    if hasattr(value, "model_dump"):
        return {"class": type(value).__name__, **plain(value.model_dump(), names)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"class": type(value).__name__,
                **plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)},
                        names)}
    if hasattr(value, "_asdict"):  # a NamedTuple: StateSnapshot, PregelTask...
        return {"class": type(value).__name__, **plain(value._asdict(), names)}
    if isinstance(value, str):
        return _MINTED.sub(lambda m: names.setdefault(m.group(), f"<id{len(names)}>"),
                           value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in _DROPPED:
                continue
            if k == "channel_versions":
                out[k] = {c: _version(x) for c, x in v.items()}
            elif k == "versions_seen":
                out[k] = {n: {c: _version(x) for c, x in seen.items()}
                          for n, seen in v.items()}
            else:
                out[plain(str(k), names)] = plain(v, names)
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v, names) for v in value]
    return value


# --- the runs ------------------------------------------------------------------------

Op = tuple[str, int]


def _run(graph: CompiledStateGraph[Any, Any, Any, Any], ops: list[Op]) -> list[Any]:
    """Run ``ops``; what each gave (its result, or the error's type)."""
    outcomes: list[Any] = []
    for i, (op, arg) in enumerate(ops):
        try:
            if op == "send":
                result = graph.invoke(
                    {"messages": [HumanMessage(f"message {i}", id=f"m{i}")]}, CONFIG)
            elif op == "resume":
                state = graph.get_state(CONFIG)
                if not state.next:
                    outcomes.append("idle")
                    continue
                interrupted = any(t.interrupts for t in state.tasks)
                result = graph.invoke(Command(resume=f"r{arg}") if interrupted else None,
                                      CONFIG)
            else:  # a fork from an older checkpoint: update_state, or a replay
                history = list(graph.get_state_history(CONFIG))
                if not history:
                    outcomes.append("empty")
                    continue
                config = history[arg % len(history)].config
                if op == "update":
                    result = graph.update_state(config, {"notes": [f"fork {i}"]})
                else:
                    result = graph.invoke(None, config)
            outcomes.append(result)
        except Exception as exc:  # the same refusal is expected of both
            outcomes.append(type(exc).__name__)
    return outcomes


def _answers(saver: BaseCheckpointSaver[Any], graph: CompiledStateGraph[Any, Any, Any, Any]
             ) -> dict[str, Any]:
    tuples = list(saver.list(CONFIG))
    return {
        "latest": saver.get_tuple(CONFIG),
        "list": tuples,
        "each": [saver.get_tuple(t.config) for t in tuples],
        "list_2": list(saver.list(CONFIG, limit=2)),
        "history": list(graph.get_state_history(CONFIG)),
        "state": graph.get_state(CONFIG),
    }


def _on(make: Callable[[], BaseCheckpointSaver[Any]], close: Callable[[Any], None],
        kinds: list[str], before: list[int], ops: list[Op],
        check: Callable[[Any], None] = lambda saver: None) -> Any:
    names: dict[str, str] = {}
    saver = make()
    try:
        graph = build(saver, kinds, before)
        outcomes = _run(graph, ops)
        answers = _answers(saver, graph)
    finally:
        close(saver)
    fresh = make()  # a new saver reads the stored thread alike
    try:
        again = _answers(fresh, build(fresh, kinds, before))
        check(fresh)
    finally:
        close(fresh)
    return plain({"outcomes": outcomes, "answers": answers, "fresh": again}, names)


def _read_rows(fresh: DshCheckpointSaver) -> None:
    """The fresh saver read the projection's rows: it folded no log (it holds no index
    of the thread), and the store kept the rows current (it folds no event of its own)."""
    assert not fresh._threads.held(THREAD)
    if fresh.store.stored():
        view = fresh.store.projection(THREAD, "langgraph/checkpoints")
        assert view.folded == 0
        assert view.covers == len(fresh.store.read(THREAD))


_KEY = Keyring({"k1": bytes(range(32))})
_DATABASES = itertools.count()


@contextlib.contextmanager
def _stores(kind: str, base: Path, request: pytest.FixtureRequest
            ) -> Iterator[Callable[[], DshCheckpointSaver]]:
    """A maker of savers, each on a store object of its own over one store of ``kind``."""
    if kind == "memory":
        backend = MemoryBackend()
        yield lambda: DshCheckpointSaver(DurableStore(backend))
    elif kind == "sealed":
        yield lambda: DshCheckpointSaver(open_store(str(base / "dsh"), keys=_KEY))
    elif kind == "postgresql":
        databases = request.getfixturevalue("postgresql_databases")
        with databases.database(f"lg_diff_{next(_DATABASES)}") as url:
            yield lambda: DshCheckpointSaver(url)
    else:
        url = {"sqlite": f"sqlite:///{base / 'dsh.db'}", "jsonl": str(base / "dsh"),
               "jsonl+zstd": f"jsonl+zstd:///{base / 'dsh'}"}[kind]
        yield lambda: DshCheckpointSaver(url)


_KINDS = ["sqlite", "jsonl", "jsonl+zstd", "memory", "sealed"] + (
    ["postgresql"] if os.environ.get("DSH_SESSION_TEST_POSTGRESQL") else [])


_OPS = st.lists(st.tuples(st.sampled_from(["send", "send", "resume", "resume", "update",
                                           "replay"]),
                          st.integers(0, 30)), min_size=1, max_size=7)


@pytest.mark.parametrize("store", _KINDS)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(sorted(NODES)), min_size=1, max_size=3),
       before=st.lists(st.integers(0, 2), max_size=1), ops=_OPS,
       radix=st.sampled_from([2, 8]), pieces=st.sampled_from([2, 3, 32]))
def test_the_saver_answers_as_sqlite_saver_on_random_graphs_and_runs(
        kinds: list[str], before: list[int], ops: list[Op], store: str, radix: int,
        pieces: int, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
        ) -> None:
    # Short chains too (2 and 3 pieces at most): full values among the deltas within a
    # few steps; in base 2, deltas on earlier values than the last within a few steps.
    monkeypatch.setattr(_deltas, "RADIX", radix)
    monkeypatch.setattr(_deltas, "PIECES", pieces)
    with tempfile.TemporaryDirectory(prefix="dsh-lg-diff-") as tmp:
        base = Path(tmp)

        def peer() -> SqliteSaver:
            return SqliteSaver(sqlite3.connect(base / "peer.db", check_same_thread=False))

        expected = _on(peer, lambda s: s.conn.close(), kinds, before, ops)
        with _stores(store, base, request) as make:
            got = _on(make, lambda s: s.store.close(), kinds, before, ops, _read_rows)
        assert got == expected
