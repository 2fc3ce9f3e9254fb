"""The graph of ``tests/langgraph/old_thread/``, and how it was made: a thread stored by
``DshCheckpointSaver`` as it was before channel values were stored as deltas (run at
commit efe64e2 of main, issue 39), and the state history a saver must read from it
(``history.json``). Running it again with today's saver would store deltas::

    python tests/langgraph/old_thread_support.py
"""

from __future__ import annotations

import json
import operator
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

HERE = Path(__file__).resolve().parent / "old_thread"
THREAD = "old"


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[str], operator.add]
    count: int


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, " + "warm " * 40


def call(city: str, n: int) -> AIMessage:
    return AIMessage(content="", id=f"ai-call-{n}", tool_calls=[
        {"name": "weather", "args": {"city": city}, "id": f"call-{n}", "type": "tool_call"}])


def answer(text: str, n: int) -> AIMessage:
    return AIMessage(content=text, id=f"ai-answer-{n}")


def build(saver: Any, responses: list[AIMessage]) -> CompiledStateGraph[Any, Any, Any, Any]:
    model = GenericFakeChatModel(messages=iter(responses))

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])],
                "notes": [f"agent saw {len(state['messages'])}"],
                "count": state.get("count", 0) + 1}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver, interrupt_before=["tools"])


def plain(value: Any) -> Any:
    """A JSON form of what the graph's state and history hold."""
    if hasattr(value, "model_dump"):
        return {"class": type(value).__name__, **plain(value.model_dump())}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "_asdict"):
        return plain(value._asdict())
    return value


def history(graph: CompiledStateGraph[Any, Any, Any, Any]) -> list[Any]:
    config: RunnableConfig = {"configurable": {"thread_id": THREAD}}
    return [plain({"values": s.values, "next": s.next, "config": s.config,
                   "parent_config": s.parent_config, "metadata": s.metadata,
                   "created_at": s.created_at,
                   "tasks": [(t.id, t.name, t.interrupts) for t in s.tasks]})
            for s in graph.get_state_history(config)]


def main() -> None:
    from dsh_session_langgraph import DshCheckpointSaver

    store = HERE / "store"
    shutil.rmtree(store, ignore_errors=True)
    config: RunnableConfig = {"configurable": {"thread_id": THREAD}}
    with DshCheckpointSaver(str(store)) as saver:
        graph = build(saver, [call("Paris", 1), answer("Sunny in Paris.", 1),
                              answer("You are welcome.", 2), call("Rome", 3)])
        graph.invoke({"messages": [HumanMessage("Weather in Paris?", id="h-1")]}, config)
        graph.invoke(None, config)  # past the interrupt before the tool
        graph.invoke({"messages": [HumanMessage("Thanks", id="h-2")]}, config)
        graph.invoke({"messages": [HumanMessage("And Rome?", id="h-3")]}, config)
        assert graph.get_state(config).next == ("tools",)  # left interrupted
        (HERE / "history.json").write_text(json.dumps(history(graph), indent=1) + "\n")


if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE.parent]
    main()
