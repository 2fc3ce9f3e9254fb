"""A LangGraph run is one turn: offline runs of a real ``StateGraph`` (a scripted model,
a tool node, an ``interrupt()`` and an ``interrupt_before``) on ``DshCheckpointSaver``
log one turn a run with a step per model call; a pause ends its turn awaiting input,
the ``Command(resume=...)`` that continues it is the next turn's input, and a reload's
crash repair leaves the paused turn as it is. Each log is valid under ``dsh-session
validate --strict`` (a real subprocess) and under the invariants plugin (turn and step
enclosure, each tool result in its call's step), and ``show`` reads as the run. A task's
write (or a resume's) stored after the rest of its run, kept back by the test and made
after it, is in the run's turn; a log ``prune`` or ``delete_for_runs`` rewrites reads as
the runs it keeps."""

from __future__ import annotations

import operator
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from graph_support import State, answer, call, weather
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from saver_support import checkpoint, put

from dsh_session_core import SessionStore, create_plugin_manager, open_store, to_wire
from dsh_session_core.invariants import InvariantsPlugin
from dsh_session_langgraph import DshCheckpointSaver

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

_CLI = Path(sys.executable).parent / "dsh-session"
QUESTION = "Weather in Paris?"


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def _graph(saver: DshCheckpointSaver, responses: Sequence[AIMessage], *,
           approve: bool = False, before: bool = False) -> Any:
    """agent -> tools -> agent, the model answering ``responses``; with ``approve``, an
    ``approve`` node asks ``interrupt()`` before the tools; with ``before``, the graph
    pauses before the tools (``interrupt_before``)."""
    model = GenericFakeChatModel(messages=iter(responses))

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def ask(state: State) -> dict[str, Any]:
        interrupt({"question": "run the tool?"})
        return {}

    first = "approve" if approve else "tools"

    def route(state: State) -> str:
        last = state["messages"][-1]
        return first if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, [first, END])
    if approve:
        builder.add_node("approve", ask)
        builder.add_edge("approve", "tools")
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver,
                           interrupt_before=["tools"] if before else None)


def _events(store_url: str, tid: str) -> list[dict[str, Any]]:
    with open_store(store_url) as store:
        return [to_wire(e) for e in store.read_session(tid).events]


def _turns(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each turn: its trigger, its reason, and what it holds, step by step, in the
    words of a reader (``user: ...``, ``assistant: ...``, ``call weather``,
    ``result weather: ...``, ``resume: ...``); the plugin's other events left out."""
    turns: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for e in events:
        t, d = e["type"], e["data"]
        if t == "turn/start":
            turns.append({"trigger": d["trigger"], "steps": [], "items": []})
            continue
        assert turns, f"{t} outside a turn"
        turn = turns[-1]
        if t == "turn/end":
            turn["reason"] = d["reason"]
        elif t == "step/start":
            turn["steps"].append([])
        elif t == "user/message":
            turn["items"].append("user: " + d["content"][0]["text"])
        elif t == "langgraph/resume":
            turn["items"].append("resume: " + d["value"])
        elif t in ("assistant/message", "tool/call", "tool/result"):
            if t == "assistant/message":
                text = " ".join(b.get("text") or f"[calls {b['name']}]" for b in d["content"])
                for b in d["content"]:
                    if b["type"] == "tool-call":
                        names[b["id"]] = b["name"]
                item = "assistant: " + text
            elif t == "tool/call":
                item = "call " + d["name"]
            else:
                item = f"result {names.get(d['callId'], '?')}: {d['content'][0]['text']}"
            turn["steps"][-1].append(item)
    return turns


def _valid(store_url: str, tid: str, events: list[dict[str, Any]]) -> None:
    """Strict validation (the CLI) and the invariants plugin's replay of the log."""
    done = subprocess.run([str(_CLI), "validate", "--strict", "--store", store_url,
                           "--id", tid], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    pm = create_plugin_manager()
    pm.register(InvariantsPlugin(), name="invariants")
    SessionStore(pm).create(f"replay-{tid}", seed=events)  # raises on a violation


def _show(store_url: str, tid: str) -> str:
    done = subprocess.run([str(_CLI), "show", "--store", store_url, tid],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _shown_items(store_url: str, tid: str, *flags: str) -> list[list[tuple[str, bool]]]:
    """``show --json``'s items, turn by turn: each item's type, and whether it is a raw
    record (``raw: true``, kept by ``--raw``)."""
    import json

    done = subprocess.run([str(_CLI), "show", "--json", *flags, "--store", store_url, tid],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return [[(i["type"], i.get("raw", False)) for i in block["items"]]
            for block in json.loads(done.stdout)["timeline"]]


_USER = {"kind": "message", "source": {"kind": "user"}}
_PLUGIN = {"kind": "message", "source": {"kind": "plugin", "plugin": "langgraph"}}
_TOOL_STEP = ["call weather", "result weather: sunny in Paris"]
_ANSWER_STEP = ["assistant: Sunny in Paris."]


def test_a_question_with_one_tool_call_is_one_turn_of_two_steps(store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        _graph(saver, [call(), answer()]).invoke(
            {"messages": [HumanMessage(QUESTION)]}, _config("one"))
        # Ended when the run's last writes came, not by close().
        ended = _events(store_url, "one")
    events = _events(store_url, "one")
    assert ended == events
    assert _turns(events) == [{
        "trigger": _USER, "items": [f"user: {QUESTION}"], "reason": {"kind": "completed"},
        "steps": [["assistant: [calls weather]", *_TOOL_STEP], _ANSWER_STEP]}]
    _valid(store_url, "one", events)
    shown = _show(store_url, "one")
    assert "1 turn(s)" in shown
    assert "turn 1 · message from user" in shown
    assert "2 step(s) · completed" in shown
    # LangGraph's own records (checkpoints, writes) are folded away unless --raw.
    assert _shown_items(store_url, "one") == [[
        ("user/message", False), ("step/start", False), ("assistant/message", False),
        ("tool/call", False), ("tool/result", False), ("step/start", False),
        ("assistant/message", False)]]
    raw = [item for block in _shown_items(store_url, "one", "--raw") for item in block]
    assert {t for t, is_raw in raw if is_raw} == {"langgraph/checkpoint", "langgraph/writes"}
    assert all(t.startswith("langgraph/") for t, is_raw in raw if is_raw)
    assert [item for item in raw if not item[1]] == _shown_items(store_url, "one")[0]


def test_an_interrupt_ends_the_turn_awaiting_input_and_the_resume_is_the_next_input(
        store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        graph = _graph(saver, [call(), answer()], approve=True)
        graph.invoke({"messages": [HumanMessage(QUESTION)]}, _config("ask"))
        assert graph.get_state(_config("ask")).next == ("approve",)
        paused = _events(store_url, "ask")
        result = graph.invoke(Command(resume="yes, run it"), _config("ask"))
        assert result["messages"][-1].content == "Sunny in Paris."
    asked = 'awaiting input: interrupt({"question":"run the tool?"})'
    first = {"trigger": _USER, "items": [f"user: {QUESTION}"],
             "steps": [["assistant: [calls weather]"]],
             "reason": {"kind": "aborted", "reason": asked}}
    assert _turns(paused) == [first]
    events = _events(store_url, "ask")
    assert _turns(events) == [first, {
        "trigger": _PLUGIN, "items": ["resume: yes, run it"],
        "steps": [_TOOL_STEP, _ANSWER_STEP], "reason": {"kind": "completed"}}]
    _valid(store_url, "ask", events)
    shown = _show(store_url, "ask")
    assert "end        aborted: awaiting input: interrupt(" in shown
    assert '"value":"yes, run it"' in shown


@pytest.mark.parametrize("reopen", [False, True], ids=["same_saver", "new_saver"])
def test_interrupt_before_ends_the_turn_awaiting_input(store_url: str, reopen: bool) -> None:
    saver = DshCheckpointSaver(store_url)
    try:
        graph = _graph(saver, [call(), answer()], before=True)
        graph.invoke({"messages": [HumanMessage(QUESTION)]}, _config("before"))
        assert graph.get_state(_config("before")).next == ("tools",)
        if reopen:  # a new saver (another process would be the same) resumes it
            saver.close()
            saver = DshCheckpointSaver(store_url)
            graph = _graph(saver, [answer()], before=True)
        graph.invoke(None, _config("before"))
    finally:
        saver.close()
    events = _events(store_url, "before")
    assert _turns(events) == [
        {"trigger": _USER, "items": [f"user: {QUESTION}"],
         "steps": [["assistant: [calls weather]"]],
         "reason": {"kind": "aborted",
                    "reason": "awaiting input: the run stopped before tools"}},
        {"trigger": _PLUGIN, "items": [], "steps": [_TOOL_STEP, _ANSWER_STEP],
         "reason": {"kind": "completed"}}]
    _valid(store_url, "before", events)


def test_a_paused_turn_is_not_repaired_as_interrupted(store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        _graph(saver, [call()], approve=True).invoke(
            {"messages": [HumanMessage(QUESTION)]}, _config("p1"))
        _graph(saver, [call()], before=True).invoke(
            {"messages": [HumanMessage(QUESTION)]}, _config("p2"))
    for tid in ("p1", "p2"):
        stored = _events(store_url, tid)
        assert stored[-1]["type"] == "turn/end"
        assert stored[-1]["data"]["reason"]["reason"].startswith("awaiting input")
        with open_store(store_url) as store:  # a writer's load: crash repair runs
            session = store.open(tid)
            assert [to_wire(e) for e in session.events] == stored
            store.release(session)
        assert _events(store_url, tid) == stored
        assert "interrupted" not in _show(store_url, tid)


def test_a_node_that_raises_ends_its_turn_with_the_error(store_url: str) -> None:
    def boom(state: State) -> dict[str, Any]:
        raise ValueError("boom")

    builder = StateGraph(State)
    builder.add_node("boom", boom)
    builder.add_edge(START, "boom")
    builder.add_edge("boom", END)
    with DshCheckpointSaver(store_url) as saver:
        with pytest.raises(ValueError, match="boom"):
            builder.compile(checkpointer=saver).invoke(
                {"messages": [HumanMessage(QUESTION)]}, _config("err"))
        ended = _events(store_url, "err")  # by the error's write, before close()
    events = _events(store_url, "err")
    assert ended == events
    assert _turns(events) == [{
        "trigger": _USER, "items": [f"user: {QUESTION}"], "steps": [],
        "reason": {"kind": "error", "step": 0, "message": "ValueError('boom')"}}]
    _valid(store_url, "err", events)


class Fan(TypedDict):
    items: Annotated[list[str], operator.add]


class _Late(DshCheckpointSaver):
    """A saver on which the writes of node ``late``'s tasks (``""``: the null task's,
    which a ``Command`` input makes) come last: each ``put_writes`` LangGraph makes for
    them is kept back until :meth:`release` makes it, as it is (LangGraph runs them in a
    background worker beside its ``put`` calls, so under load they may be stored after
    the checkpoint that ends the run)."""

    def __init__(self, store_url: str, late: str) -> None:
        super().__init__(store_url)
        self.late = late
        self.kept: list[tuple[Any, ...]] = []

    def put_writes(self, config: Any, writes: Any, task_id: str,
                   task_path: str = "") -> None:
        if task_path.rsplit(", ", 1)[-1] == self.late:
            self.kept.append((config, writes, task_id, task_path))
        else:
            super().put_writes(config, writes, task_id, task_path)

    def __enter__(self) -> _Late:
        return self

    def release(self) -> None:
        assert self.kept, f"no write of {self.late} was kept back"
        for args in self.kept:
            super().put_writes(*args)
        self.kept.clear()


def _ends(events: list[dict[str, Any]]) -> list[Any]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


def test_a_task_write_stored_after_the_run_ended_is_in_the_run_turn(
        store_url: str) -> None:
    """The tool's write (on the checkpoint before the model's answer) stored after the
    run's last checkpoint and the answer's write: the turn waits for it, then ends."""
    with _Late(store_url, "tools") as saver:
        _graph(saver, [call(), answer()]).invoke(
            {"messages": [HumanMessage(QUESTION)]}, _config("late"))
        # Every checkpoint is stored, but not every write of the tasks that made them.
        assert _ends(_events(store_url, "late")) == []
        saver.release()
        ended = _events(store_url, "late")  # by the late write, not by close()
    events = _events(store_url, "late")
    assert ended == events
    assert [e["type"] for e in events[-3:]] == ["langgraph/writes", "step/end", "turn/end"]
    assert _turns(events) == [{
        "trigger": _USER, "items": [f"user: {QUESTION}"], "reason": {"kind": "completed"},
        "steps": [["assistant: [calls weather]", *_TOOL_STEP], _ANSWER_STEP]}]
    _valid(store_url, "late", events)
    assert "1 turn(s)" in _show(store_url, "late")


def test_a_write_beside_an_interrupt_stored_after_it_is_in_the_paused_turn(
        store_url: str) -> None:
    """Two nodes run side by side, one calls ``interrupt()``; the other's write comes
    after the interrupt's and the checkpoint's: the paused turn waits for it."""
    def ask(state: Fan) -> dict[str, Any]:
        return {"items": [f"ask: {interrupt('go on?')}"]}

    def other(state: Fan) -> dict[str, Any]:
        return {"items": ["other"]}

    builder = StateGraph(Fan)
    builder.add_node("ask", ask)
    builder.add_node("other", other)
    builder.add_edge(START, "ask")
    builder.add_edge(START, "other")
    builder.add_edge("ask", END)
    builder.add_edge("other", END)
    with _Late(store_url, "other") as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"items": []}, _config("fan"))
        assert _ends(_events(store_url, "fan")) == []
        saver.release()
        asked = {"kind": "aborted", "reason": "awaiting input: interrupt(go on?)"}
        assert _ends(_events(store_url, "fan")) == [asked]
        result = graph.invoke(Command(resume="yes"), _config("fan"))
        assert sorted(result["items"]) == ["ask: yes", "other"]
    events = _events(store_url, "fan")
    assert _turns(events) == [
        {"trigger": _PLUGIN, "items": [], "steps": [], "reason": asked},
        {"trigger": _PLUGIN, "items": ["resume: yes"], "steps": [],
         "reason": {"kind": "completed"}}]
    _valid(store_url, "fan", events)


def test_a_resume_stored_after_the_resumed_run_is_in_its_turn(store_url: str) -> None:
    """``Command(resume=...)``'s own write (the null task's) stored after the writes and
    checkpoints of the run it resumed: the resumed node's write (it holds the resume
    too) starts the run's turn, which waits for it."""
    with _Late(store_url, "") as saver:
        graph = _graph(saver, [call(), answer()], approve=True)
        graph.invoke({"messages": [HumanMessage(QUESTION)]}, _config("resume"))
        graph.invoke(Command(resume="yes, run it"), _config("resume"))
        assert len(_ends(_events(store_url, "resume"))) == 1
        saver.release()
        ended = _events(store_url, "resume")
    events = _events(store_url, "resume")
    assert ended == events
    asked = 'awaiting input: interrupt({"question":"run the tool?"})'
    assert _turns(events) == [
        {"trigger": _USER, "items": [f"user: {QUESTION}"],
         "steps": [["assistant: [calls weather]"]],
         "reason": {"kind": "aborted", "reason": asked}},
        {"trigger": _PLUGIN, "items": ["resume: yes, run it"],
         "steps": [_TOOL_STEP, _ANSWER_STEP], "reason": {"kind": "completed"}}]
    _valid(store_url, "resume", events)


_REMOVED = {"trigger": {"kind": "injection", "source": {"kind": "plugin",
                                                         "plugin": "langgraph"}},
            "items": [], "steps": [], "reason": {"kind": "completed"}}


def test_a_rewritten_log_reads_as_the_runs_it_keeps(store_url: str) -> None:
    """``delete_for_runs`` and ``prune`` write the log anew as the saver records what
    they keep: a turn a run (after the turn of their ``langgraph/removed``), a step a
    model call, a pause's end, a resume."""
    runs = {tid: [f"{tid}-{n}" for n in range(3)] for tid in ("rw-last", "rw-middle")}

    def config(tid: str, n: int) -> Any:
        return {"configurable": {"thread_id": tid, "run_id": runs[tid][n]}}

    with DshCheckpointSaver(store_url) as saver:
        for tid in runs:  # a paused run, its resume, then another question
            graph = _graph(saver, [call(), answer()], approve=True)
            graph.invoke({"messages": [HumanMessage(QUESTION)]}, config(tid, 0))
            graph.invoke(Command(resume="yes, run it"), config(tid, 1))
            _graph(saver, [AIMessage("Bye.")]).invoke(
                {"messages": [HumanMessage("Thanks")]}, config(tid, 2))
        live = _turns(_events(store_url, "rw-last"))
        paused, resumed, thanks = live
        assert paused["reason"]["reason"].startswith("awaiting input: interrupt(")
        assert resumed["items"] == ["resume: yes, run it"]
        assert thanks["steps"] == [["assistant: Bye."]]
        assert _turns(_events(store_url, "rw-middle")) == live

        saver.delete_for_runs([runs["rw-last"][2], runs["rw-middle"][1]])
        # The last run gone: the others read as they were written.
        assert _turns(_events(store_url, "rw-last")) == [_REMOVED, paused, resumed]
        # The resumed run gone: its resume (a write on the paused checkpoint, kept) is
        # a turn that ends where the thread was left; the next run's input checkpoint
        # records the messages the resumed run added, then its own.
        assert _turns(_events(store_url, "rw-middle")) == [_REMOVED, paused, {
            "trigger": _PLUGIN, "items": ["resume: yes, run it"], "steps": [],
            "reason": {"kind": "aborted",
                       "reason": "awaiting input: the run stopped before approve"}}, {
            "trigger": _USER, "items": ["user: Thanks"],
            "steps": [_TOOL_STEP, _ANSWER_STEP, ["assistant: Bye."]],
            "reason": {"kind": "completed"}}]

        # Only the latest checkpoint kept: one turn, the conversation it holds.
        saver.prune(["rw-last"], strategy="keep_latest")
        pruned = {"trigger": _PLUGIN, "items": [f"user: {QUESTION}"],
                  "steps": [["assistant: [calls weather]", *_TOOL_STEP], _ANSWER_STEP],
                  "reason": {"kind": "completed"}}
        assert _turns(_events(store_url, "rw-last")) == [_REMOVED, pruned]
        # And the thread goes on, a turn a run.
        _graph(saver, [AIMessage("Bye.")]).invoke(
            {"messages": [HumanMessage("Thanks")]}, _config("rw-last"))
    events = _events(store_url, "rw-last")
    assert _turns(events) == [_REMOVED, pruned, thanks]
    _valid(store_url, "rw-last", events)
    assert "3 turn(s)" in _show(store_url, "rw-last")
    _valid(store_url, "rw-middle", _events(store_url, "rw-middle"))


def test_a_rewrite_ends_a_turn_where_the_old_log_ended_a_stopped_run(
        store_url: str) -> None:
    """A turn ``close()`` ended (its run stopped, not seen to end: the data cannot tell
    where), then a run that goes on from it with no start: the rewritten log still
    ends the first turn there."""
    with DshCheckpointSaver(store_url) as saver:
        c1 = put(saver, "stop", None, checkpoint({"n": 1}, {"n": 1}), {"n": 1}, run_id="a")
    with DshCheckpointSaver(store_url) as saver:
        c2 = put(saver, "stop", c1, checkpoint({"n": 2}, {"n": 2}), {"n": 2}, run_id="a")
        put(saver, "stop", c2, checkpoint({"n": 3}, {"n": 3}), {"n": 3}, run_id="b")
    stopped = {"kind": "aborted", "reason": "awaiting input: the run stopped before its "
                                            "next tasks"}
    turn = {"trigger": _PLUGIN, "items": [], "steps": [], "reason": stopped}
    assert _turns(_events(store_url, "stop")) == [turn, turn]
    with DshCheckpointSaver(store_url) as saver:
        saver.delete_for_runs(["b"])
    events = _events(store_url, "stop")
    assert _turns(events) == [_REMOVED, turn, turn]
    _valid(store_url, "stop", events)


def test_the_input_write_stored_before_its_checkpoint_opens_the_user_turn(
        store_url: str) -> None:
    """The ``__start__`` task's write (the input, applied) stored before the input
    checkpoint's ``put``, as LangGraph's background worker may store it: it opens the
    run's turn, a message from the user."""
    question = HumanMessage(QUESTION, id="q-1")
    made = checkpoint({"__start__": {"messages": [question]}}, {"__start__": 1})
    with DshCheckpointSaver(store_url) as saver:
        saver.put_writes(
            {"configurable": {"thread_id": "early", "checkpoint_ns": "",
                              "checkpoint_id": made["id"]}},
            [("messages", [question]), ("branch:to:agent", None)], "task-start",
            "~__pregel_pull, __start__")
        saver.put(_config("early"), made, {"source": "input", "step": -1}, {"__start__": 1})
    events = _events(store_url, "early")
    assert [e["type"] for e in events[:3]] == [
        "turn/start", "langgraph/writes", "langgraph/checkpoint"]
    assert [t["trigger"] for t in _turns(events)] == [_USER]
    _valid(store_url, "early", events)
