"""Benchmark of ``DshSessionService`` (dsh-session-adk) against ADK's own
``DatabaseSessionService`` on SQLite (``sqlite+aiosqlite``), measured in one run on the
same events: ``append_event`` (each event durable before it returns, on both) per
second, and ``get_session`` (the whole session; ``num_recent_events``; ``after_timestamp``)
in milliseconds, the median of alternating rounds, each answer checked equal to ADK's. The
dsh service is measured on its SQLite and its JSONL store; the target (get_session at
least 10x ADK's) is printed with each figure::

    python bench/adk.py              # 5,000 events, a table
    python bench/adk.py --events 2000 --rounds 5 --json

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types

from dsh_session_adk import DshSessionService

APP, USER = "bench", "user"


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


def _view(session: object) -> list[dict[str, object]]:
    """What a caller sees of the events, to check that the services agree."""
    return [e.model_dump(mode="json") for e in session.events]  # type: ignore[attr-defined]


async def _get(service: BaseSessionService, config: GetSessionConfig | None
               ) -> tuple[float, list[dict[str, object]]]:
    t0 = time.perf_counter()
    got = await service.get_session(app_name=APP, user_id=USER, session_id="s", config=config)
    took = time.perf_counter() - t0
    assert got is not None
    return took, _view(got)


#: What ``get_session`` is asked: the whole session, then a Runner's usual window.
CONFIGS: dict[str, GetSessionConfig | None] = {
    "whole": None,
    "num_recent_events=100": GetSessionConfig(num_recent_events=100),
    "after_timestamp (last 10%)": None,  # filled in by run(): the timestamp depends on n
}
#: The reader of the SQLite store that did not write the session.
COLD = "DshSessionService (sqlite), another reader"
#: The target: dsh's get_session at least this many times ADK's database service's.
TARGET = 10.0


async def run(n: int, rounds: int) -> dict[str, object]:
    events = _events(n)
    CONFIGS["after_timestamp (last 10%)"] = GetSessionConfig(
        after_timestamp=events[n - n // 10].timestamp)
    folder = Path(tempfile.mkdtemp())
    makers: dict[str, Callable[[], BaseSessionService]] = {
        "adk DatabaseSessionService (sqlite+aiosqlite)":
            lambda: DatabaseSessionService(f"sqlite+aiosqlite:///{folder}/adk.db"),
        "DshSessionService (sqlite)": lambda: DshSessionService(f"sqlite:///{folder}/dsh.db"),
        "DshSessionService (jsonl)": lambda: DshSessionService(str(folder / "logs")),
    }
    services = {name: make() for name, make in makers.items()}
    appends: dict[str, float] = {}
    try:
        for name, service in services.items():
            session = await service.create_session(app_name=APP, user_id=USER, session_id="s")
            t0 = time.perf_counter()
            for e in events:
                await service.append_event(session, e.model_copy(deep=True))
            appends[name] = n / (time.perf_counter() - t0)
        # A service that did not write the session (another process, after a restart):
        # every get_session reads the log. No target: a figure.
        services[COLD] = DshSessionService(f"sqlite:///{folder}/dsh.db")
        # Alternating rounds: each round asks every service once, in turn, for each config.
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for config_name, config in CONFIGS.items():
                seen: list[dict[str, object]] | None = None
                for name, service in services.items():
                    took, view = await _get(service, config)
                    times.setdefault((name, config_name), []).append(took)
                    if seen is None:
                        seen = view
                    elif view != seen:
                        msg = f"{name} gave other events than ADK for {config_name}"
                        raise AssertionError(msg)
    finally:
        for service in services.values():
            close = getattr(service, "close", None)
            if close is not None:
                await close()
    medians = {k: statistics.median(v) * 1000 for k, v in times.items()}
    return {"appends": appends, "get_ms": medians}


def main() -> None:
    """Run once and print the figures and the targets."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args.events, args.rounds))
    appends: dict[str, float] = results["appends"]  # type: ignore[assignment]
    get_ms: dict[tuple[str, str], float] = results["get_ms"]  # type: ignore[assignment]
    peer = next(iter(appends))
    if args.json:
        print(json.dumps({"events": args.events, "rounds": args.rounds, "appends": appends,
                          "get_ms": {f"{k[0]} / {k[1]}": v for k, v in get_ms.items()}}))
        return
    print(f"{args.events} events, one session; get_session: median of {args.rounds} "
          f"alternating rounds, events checked equal to ADK's")
    print(f"{'service':48} {'append_event/s':>15}")
    for name, rate in appends.items():
        print(f"{name:48} {rate:15.0f}")
    print()
    print(f"{'get_session':28} {'service':48} {'ms':>8} {'x ADK':>7}  target")
    for config_name in CONFIGS:
        base = get_ms[(peer, config_name)]
        for name in [*appends, COLD]:
            ms = get_ms[(name, config_name)]
            if name == COLD:
                print(f"{config_name:28} {name:48} {ms:8.1f} {base / ms:6.1f}x  (no target)")
                continue
            if name == peer:
                print(f"{config_name:28} {name:48} {ms:8.1f}")
                continue
            ratio = base / ms
            verdict = "met" if ratio >= TARGET else "MISSED"
            print(f"{config_name:28} {name:48} {ms:8.1f} {ratio:6.1f}x  >= {TARGET:.0f}x "
                  f"{verdict}")


if __name__ == "__main__":
    main()
