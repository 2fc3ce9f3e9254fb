"""A real ``StateGraph`` with a tool node on ``DshCheckpointSaver``: interrupted before
the tool, resumed from its checkpoint in a new process, it ends in the state an
uninterrupted run reaches; the conversation is in the log as core message events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from graph_support import answer, build, call, summary
from langchain_core.messages import HumanMessage

from dsh_session_core import open_store, to_wire
from dsh_session_langgraph import DshCheckpointSaver

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

_HERE = Path(__file__).resolve().parent


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def test_an_interrupted_graph_resumes_in_a_new_process_with_the_same_state(
        store_url: str) -> None:
    question = {"messages": [HumanMessage("Weather in Paris?")]}
    with DshCheckpointSaver(store_url) as saver:
        # The control: the same graph, its interrupt passed in this process.
        control = build(saver, [call(), answer()])
        control.invoke(question, _config("control"))
        expected = summary(control.invoke(None, _config("control"))["messages"])
        graph = build(saver, [call()])
        graph.invoke(question, _config("chat"))
        assert graph.get_state(_config("chat")).next == ("tools",)
    assert [m["type"] for m in expected] == ["human", "ai", "tool", "ai"]
    assert expected[2]["content"] == "sunny in Paris"

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(_HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(_HERE / "graph_support.py"), store_url,
                           "chat"], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(expected))

    with DshCheckpointSaver(store_url) as saver:  # read back here: what the child stored
        state = build(saver, []).get_state(_config("chat"))
        assert state.next == ()
        assert summary(state.values["messages"]) == expected

    with open_store(store_url) as store:
        log = store.read_session("chat")
        assert [m.role for m in log.derive_messages()] == [
            "user", "assistant", "user", "assistant"]
        call_block = to_wire(log.derive_messages()[1].content[0])
        assert (call_block["name"], json.loads(call_block["arguments"])) == (
            "weather", {"city": "Paris"})
        result = to_wire(log.derive_messages()[2].content[0])
        assert result["toolCallId"] == "call-1"
