"""The LangGraph row of docs/erasing.md, checked by searching every file of the store
for a marker: ``delete_thread`` rewrites the thread's log without its checkpoints (a
JSONL log file replaced; a SQLite database's rows deleted, their bytes left in its freed
pages); ``store.forget(thread_id)`` leaves no byte of the thread."""

from __future__ import annotations

from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from dsh_session_core import open_store
from dsh_session_langgraph import DshCheckpointSaver, LanggraphRemoved
from erasing_support import files_holding, new_marker, no_file_holds, store_root

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")

THREAD = "thread-q7"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _run(saver: DshCheckpointSaver, marker: str) -> None:
    def answer(state: State) -> State:
        return {"messages": [AIMessage(f"hello {marker}")]}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(f"my name is {marker}")]}, CONFIG)


def _write(url: str, marker: str) -> None:
    with DshCheckpointSaver(url) as saver:
        _run(saver, marker)
    with open_store(url) as store:
        assert {h.session_id for h in store.search(marker)} == {THREAD}  # indexed


def test_delete_thread_rewrites_the_log_without_its_checkpoints(store_url: str) -> None:
    marker = new_marker()
    _write(store_url, marker)
    with DshCheckpointSaver(store_url) as saver:
        saver.delete_thread(THREAD)
        assert saver.get_tuple(CONFIG) is None
    with open_store(store_url) as store:
        log = list(store.read(THREAD))
        assert any(isinstance(e, LanggraphRemoved) for e in log)
        assert not [e for e in log if marker in str(e.data)]
        assert list(store.search(marker)) == []
    left = files_holding(store_root(store_url), marker)
    if store_url.startswith("sqlite:"):
        assert left  # the deleted rows' bytes, in the database's freed pages
    else:
        assert left == []  # the log file replaced: it held the marker, nothing else did


def test_forget_leaves_no_byte_of_the_thread(store_url: str) -> None:
    marker = new_marker()
    _write(store_url, marker)
    with open_store(store_url) as store:
        done = store.forget(THREAD)
        assert done.complete
    no_file_holds(store_url, marker, THREAD)
