"""The graph the LangGraph tests run: an agent node calling a fake chat model (offline,
scripted) and a tool node, interrupted before the tool; run as a script it resumes the
thread from its checkpoint in this new process and prints the final state as JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

from dsh_session_langgraph import DshCheckpointSaver


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def call() -> AIMessage:
    return AIMessage(content="", tool_calls=[
        {"name": "weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}])


def answer() -> AIMessage:
    return AIMessage(content="Sunny in Paris.")


def build(saver: DshCheckpointSaver, responses: Sequence[AIMessage]
          ) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The graph, its model answering ``responses`` in order."""
    model = GenericFakeChatModel(messages=iter(responses))

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

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


def summary(messages: Sequence[AnyMessage]) -> list[dict[str, Any]]:
    """The messages without their random ids: what a resumed run must give again."""
    out = []
    for m in messages:
        item: dict[str, Any] = {"type": m.type, "content": m.content}
        if isinstance(m, AIMessage):
            item["tool_calls"] = [(c["name"], c["args"], c["id"]) for c in m.tool_calls]
        if m.type == "tool":
            item["tool_call_id"] = getattr(m, "tool_call_id", None)
        out.append(item)
    return out


async def _resume(url: str, thread_id: str) -> list[dict[str, Any]]:
    async with DshCheckpointSaver(url) as saver:
        graph = build(saver, [answer()])  # this process's model: the second answer only
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        state = await graph.aget_state(config)
        assert state.next == ("tools",), state.next
        result = await graph.ainvoke(None, config)
        return summary(result["messages"])


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_resume(sys.argv[1], sys.argv[2]))))
