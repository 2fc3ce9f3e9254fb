"""Benchmark of ``DshCheckpointSaver`` (dsh-session-langgraph) against LangGraph's own
``SqliteSaver`` (langgraph-checkpoint-sqlite) on a real chat graph, measured in one run:
a ``StateGraph`` whose ``messages`` channel merges with ``add_messages``, a model node
(a deterministic offline chat model answering with a tool call every other turn, its
messages a few hundred bytes to a few KB) and a ``ToolNode``. Each round runs 100 turns
on one thread (``invoke`` with a new user message), then resumes from a fresh saver:
``get_state``, the newest 10 of ``get_state_history``, one more turn. The savers take
turns within a round, their order alternating between rounds; the figures are medians.
The bytes on disk are printed after 25, 50 and 100 turns (each saver closed first, so
the SQLite files hold everything; reopened, and its state read, before the clock goes
on). The final state's messages are checked equal between the peer and each dsh saver
(ids aside: ``add_messages`` gives a tool's message a random one)::

    python bench/langgraph_chat.py                 # 100 turns, 3 rounds, a table
    python bench/langgraph_chat.py --turns 40 --rounds 1 --json
    python bench/langgraph_chat.py --radix 4 --pieces 16   # dsh's delta chains

A benchmark, not a test: it asserts nothing of its figures and is never run by the test
suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

# Run as a script, this file's folder comes first on sys.path, where bench/langgraph.py
# would shadow the langgraph package: the folder is taken off before LangGraph is imported.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from langchain_core.callbacks import CallbackManagerForLLMRun  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.graph.state import CompiledStateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

from dsh_session_langgraph import DshCheckpointSaver, _deltas  # noqa: E402

THREAD = "chat"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
SAVERS = ("peer", "dsh_sqlite", "dsh_jsonl")
MARKS = (25, 50, 100)
#: The targets of issue 39: dsh's bytes over the peer's at most, its speeds at least.
BYTES_TARGET, TURNS_TARGET, RESUME_TARGET = 0.2, 1.5, 3.0

_WORDS = ("the", "graph", "state", "channel", "message", "tool", "result", "weather",
          "city", "forecast", "model", "answer", "question", "checkpoint", "thread",
          "durable", "session", "append", "version", "value", "rain", "sun", "wind",
          "temperature", "tomorrow", "morning", "evening", "report", "summary", "detail")


def _text(seed: str, low: int, high: int) -> str:
    """Deterministic prose of ``low`` to ``high`` bytes or so."""
    rng = random.Random(seed)
    size = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words).capitalize() + "."


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def forecast(city: str, days: int) -> str:
    """The forecast for a city over some days."""
    return _text(f"forecast {city} {days}", 800, 2000)


class ScriptedChatModel(BaseChatModel):
    """An offline chat model: after an even-numbered user message it calls the
    ``forecast`` tool, after a tool's result (or an odd-numbered user message) it
    answers in prose; everything it says is a function of the conversation's length."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        n = len(messages)
        humans = sum(1 for m in messages if isinstance(m, HumanMessage))
        usage = {"input_tokens": 40 * n, "output_tokens": 120, "total_tokens": 40 * n + 120}
        meta = {"model_name": "scripted-1", "finish_reason": "stop"}
        if isinstance(messages[-1], HumanMessage) and humans % 2 == 1:
            message = AIMessage(
                content=_text(f"pre {n}", 80, 200), id=f"ai-{n}",
                tool_calls=[{"name": "forecast", "id": f"call-{n}", "type": "tool_call",
                             "args": {"city": f"City {humans}", "days": 1 + n % 7}}],
                usage_metadata=usage,
                response_metadata={**meta, "finish_reason": "tool_calls"})
        else:
            message = AIMessage(content=_text(f"answer {n}", 600, 3000), id=f"ai-{n}",
                                usage_metadata=usage,
                                response_metadata=meta)
        return ChatResult(generations=[ChatGeneration(message=message)])


def build(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    model = ScriptedChatModel()

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([forecast]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def _question(turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=_text(f"question {turn}", 150, 600),
                                      id=f"human-{turn}")]}


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _open(name: str, place: Path) -> BaseCheckpointSaver[Any]:
    if name == "peer":
        return SqliteSaver(sqlite3.connect(place / "peer.db", check_same_thread=False))
    if name == "dsh_sqlite":
        return DshCheckpointSaver(f"sqlite:///{place / 'g.db'}")
    return DshCheckpointSaver(str(place))


def _close(saver: BaseCheckpointSaver[Any]) -> None:
    if isinstance(saver, SqliteSaver):
        saver.conn.close()
    else:
        assert isinstance(saver, DshCheckpointSaver)
        saver.close()


def _turns(name: str, place: Path, turns: int, marks: Sequence[int]
           ) -> tuple[float, dict[int, int]]:
    """Run ``turns`` turns on a new thread: the seconds they took (closing and reopening
    at each mark aside) and the bytes on disk at each mark."""
    saver = _open(name, place)
    graph = build(saver)
    elapsed, sizes = 0.0, {}
    for turn in range(turns):
        t0 = time.perf_counter()
        graph.invoke(_question(turn), CONFIG)
        elapsed += time.perf_counter() - t0
        if turn + 1 in marks or turn + 1 == turns:
            _close(saver)
            sizes[turn + 1] = _size(place)
            saver = _open(name, place)
            graph = build(saver)
            graph.get_state(CONFIG)  # the fresh saver reads the thread off the clock
    _close(saver)
    return elapsed, sizes


def _resume(name: str, place: Path, turn: int) -> tuple[float, list[dict[str, Any]]]:
    """From a fresh saver: ``get_state``, 10 of the history, one more turn; the seconds
    taken and the final messages (their ids aside)."""
    t0 = time.perf_counter()
    saver = _open(name, place)
    graph = build(saver)
    state = graph.get_state(CONFIG)
    assert state.values["messages"]
    history = [s.config for s in graph.get_state_history(CONFIG, limit=10)]
    assert len(history) == 10
    result = graph.invoke(_question(turn), CONFIG)
    elapsed = time.perf_counter() - t0
    _close(saver)
    return elapsed, [m.model_dump(exclude={"id"}) for m in result["messages"]]


def run(turns: int, rounds: int) -> dict[str, Any]:
    marks = [m for m in MARKS if m < turns] + [turns]
    took: dict[str, list[float]] = {name: [] for name in SAVERS}
    resumed: dict[str, list[float]] = {name: [] for name in SAVERS}
    sizes: dict[str, dict[int, int]] = {}
    for r in range(rounds):
        order = SAVERS if r % 2 == 0 else SAVERS[::-1]
        answers: dict[str, list[dict[str, Any]]] = {}
        with tempfile.TemporaryDirectory(prefix="dsh-bench-langgraph-chat-") as tmp:
            for name in order:
                place = Path(tmp) / name
                place.mkdir()
                elapsed, sizes[name] = _turns(name, place, turns, marks)
                took[name].append(elapsed)
            for name in order:
                elapsed, answers[name] = _resume(name, Path(tmp) / name, turns)
                resumed[name].append(elapsed)
        for name in SAVERS:
            if answers[name] != answers["peer"]:
                msg = f"round {r}: {name}'s final messages differ from the peer's"
                raise SystemExit(msg)
    results: dict[str, Any] = {"turns": turns, "rounds": rounds, "marks": marks,
                               "radix": _deltas.RADIX, "pieces": _deltas.PIECES,
                               "messages": len(answers["peer"])}
    for name in SAVERS:
        results[f"{name}_turns_s"] = statistics.median(took[name])
        results[f"{name}_resume_ms"] = statistics.median(resumed[name]) * 1000
        for mark in marks:
            results[f"{name}_bytes_{mark}"] = sizes[name][mark]
    for name in SAVERS[1:]:
        results[f"{name}_turns_ratio"] = results["peer_turns_s"] / results[f"{name}_turns_s"]
        results[f"{name}_resume_ratio"] = (results["peer_resume_ms"]
                                           / results[f"{name}_resume_ms"])
        for mark in marks:
            results[f"{name}_bytes_ratio_{mark}"] = (results[f"{name}_bytes_{mark}"]
                                                     / results[f"peer_bytes_{mark}"])
    return results


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISS"


def report(results: dict[str, Any], out: Callable[[str], None] = print) -> None:
    turns, marks = results["turns"], results["marks"]
    out(f"{turns} turns, {results['messages']} messages at the end, "
        f"median of {results['rounds']} round(s); dsh's deltas: radix {results['radix']}, "
        f"at most {results['pieces']} pieces")
    out(f"{'':22}" + "".join(f"{name:>14}" for name in SAVERS))
    out(f"{'turns (s)':22}" + "".join(f"{results[f'{n}_turns_s']:>14.2f}" for n in SAVERS))
    out(f"{'resume (ms)':22}"
        + "".join(f"{results[f'{n}_resume_ms']:>14.1f}" for n in SAVERS))
    for mark in marks:
        out(f"{f'bytes at {mark} turns':22}"
            + "".join(f"{results[f'{n}_bytes_{mark}']:>14,}" for n in SAVERS))
    out("")
    for name in SAVERS[1:]:
        t, r = results[f"{name}_turns_ratio"], results[f"{name}_resume_ratio"]
        out(f"{name} turns speed over the peer's   {t:6.2f}  target >= {TURNS_TARGET}  "
            f"{_verdict(t >= TURNS_TARGET)}")
        out(f"{name} resume speed over the peer's  {r:6.2f}  target >= {RESUME_TARGET}  "
            f"{_verdict(r >= RESUME_TARGET)}")
        for mark in marks:
            b = results[f"{name}_bytes_ratio_{mark}"]
            target = f"target <= {BYTES_TARGET}  {_verdict(b <= BYTES_TARGET)}" if (
                mark == turns) else ""
            out(f"{name} bytes over the peer's at {mark:>3} turns {b:6.3f}  {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--radix", type=int, default=_deltas.RADIX,
                        help="the base of dsh's skip-deltas (a delta extends the value "
                             "at its place less its lowest digit's unit); default "
                             "%(default)s, as docs/decisions.md chose it by this bench")
    parser.add_argument("--pieces", type=int, default=_deltas.PIECES,
                        help="at most how many pieces a read of a list channel joins "
                             "(the saver's K); default %(default)s")
    args = parser.parse_args()
    _deltas.RADIX, _deltas.PIECES = args.radix, args.pieces
    results = run(args.turns, args.rounds)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        report(results)


if __name__ == "__main__":
    os.environ.setdefault("DSH_SESSION_DISABLE_PLUGINS", "example")
    main()
