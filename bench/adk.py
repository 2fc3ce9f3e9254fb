"""Benchmark of ``DshSessionService`` (dsh-session-adk) against ADK's own
``DatabaseSessionService`` on SQLite (``sqlite+aiosqlite``), measured in one run on the
same events: ``append_event`` (each event durable before it returns, on both) per
second, and ``get_session`` of the whole session per second. The dsh service is measured
on its SQLite and its JSONL store::

    python bench/adk.py              # a table
    python bench/adk.py --events 2000 --json

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types

from dsh_session_adk import DshSessionService

APP, USER = "bench", "user"
GETS = 20


def _events(n: int) -> list[Event]:
    """A conversation: user text, a model call, its response, the answer; repeated."""
    out: list[Event] = []
    t0 = 1_750_000_000.0
    for i in range(n):
        kind = i % 4
        inv = f"inv-{i // 4}"
        if kind == 0:
            content = types.Content(role="user", parts=[types.Part(text=f"question {i}")])
            author = "user"
        elif kind == 1:
            call = types.FunctionCall(id=f"c{i}", name="lookup", args={"q": i})
            content = types.Content(role="model", parts=[types.Part(text="Checking."),
                                                         types.Part(function_call=call)])
            author = "agent"
        elif kind == 2:
            response = types.FunctionResponse(id=f"c{i - 1}", name="lookup",
                                              response={"answer": i})
            content = types.Content(role="user", parts=[types.Part(function_response=response)])
            author = "agent"
        else:
            content = types.Content(role="model", parts=[types.Part(text=f"answer {i}")])
            author = "agent"
        out.append(Event(author=author, invocation_id=inv, content=content,
                         timestamp=t0 + i * 0.001,
                         actions=EventActions(state_delta={"turns": i} if kind == 3 else {})))
    return out


async def _measure(service: BaseSessionService, events: list[Event]) -> dict[str, float]:
    session = await service.create_session(app_name=APP, user_id=USER, session_id="s")
    t0 = time.perf_counter()
    for e in events:
        await service.append_event(session, e.model_copy(deep=True))
    appended = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(GETS):
        got = await service.get_session(app_name=APP, user_id=USER, session_id="s")
        assert got is not None
        assert len(got.events) == len(events)
    gotten = time.perf_counter() - t0
    return {"append_event_per_s": len(events) / appended, "get_session_per_s": GETS / gotten,
            "get_session_ms": gotten / GETS * 1000}


async def run(n: int) -> dict[str, dict[str, float]]:
    events = _events(n)
    folder = Path(tempfile.mkdtemp())
    makers: dict[str, Callable[[], BaseSessionService]] = {
        "adk DatabaseSessionService (sqlite+aiosqlite)":
            lambda: DatabaseSessionService(f"sqlite+aiosqlite:///{folder}/adk.db"),
        "DshSessionService (sqlite)": lambda: DshSessionService(f"sqlite:///{folder}/dsh.db"),
        "DshSessionService (jsonl)": lambda: DshSessionService(str(folder / "logs")),
    }
    results: dict[str, dict[str, float]] = {}
    for name, make in makers.items():
        service = make()
        try:
            results[name] = await _measure(service, events)
        finally:
            close = getattr(service, "close", None)
            if close is not None:
                await close()
    return results


def main() -> None:
    """Run once and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args.events))
    if args.json:
        print(json.dumps({"events": args.events, "results": results}))
        return
    print(f"{args.events} events, one session; get_session: the whole session, {GETS} times")
    print(f"{'service':48} {'append_event/s':>15} {'get_session/s':>14} {'get ms':>8}")
    for name, r in results.items():
        print(f"{name:48} {r['append_event_per_s']:15.0f} {r['get_session_per_s']:14.1f} "
              f"{r['get_session_ms']:8.1f}")


if __name__ == "__main__":
    main()
