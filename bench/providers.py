"""Benchmark of the provider conversions (dsh_session_core.providers) on the standard
workload of bench/run.py: its 6,252 derived messages converted to each target, against
``derive_messages()`` of the same session measured in the same run (cold, on a freshly
built session). Each figure is the best of several runs, the derivation's too: other
processes slow a run down, never speed it up, so the ratio holds on a busy machine.
Target: each conversion takes at most 2x the derivation::

    python bench/providers.py          # a table with the targets
    python bench/providers.py --json   # one JSON object

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import gc
import time

from dsh_session_core import Session
from dsh_session_core.providers import to_anthropic, to_openai_chat, to_openai_responses
from run import Target, cli, fill, workload

CONVERSIONS = {"openai_chat": to_openai_chat, "openai_responses": to_openai_responses,
               "anthropic": to_anthropic}
RUNS = 15


def run() -> dict[str, float]:
    appends = workload()
    sessions = []
    for _ in range(RUNS):
        s = Session("bench")
        fill(s, appends)
        sessions.append(s)
    results: dict[str, float] = {}
    # Each run derives a fresh session, then converts its messages with every target at
    # once, so that the limit (the derivation) and the figures meet the same load; CPU
    # time, so that other processes on a busy machine count for neither.
    derive_ms: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in CONVERSIONS}
    for s in sessions:
        gc.collect()
        t0 = time.process_time()
        messages = s.derive_messages()
        derive_ms.append((time.process_time() - t0) * 1000)
        for name, convert in CONVERSIONS.items():
            gc.collect()
            t0 = time.process_time()
            convert(messages)
            times[name].append((time.process_time() - t0) * 1000)
    results["derived_messages"] = len(messages)
    results["derive_cold_ms"] = min(derive_ms)
    for name in CONVERSIONS:
        results[f"{name}_ms"] = min(times[name])
    try:
        from dsh_session_core.providers import to_pydantic_ai

        to_pydantic_ai(messages[:2])  # the import, not timed
        pydantic_ms = []
        for _ in range(3):
            gc.collect()
            t0 = time.process_time()
            to_pydantic_ai(messages)
            pydantic_ms.append((time.process_time() - t0) * 1000)
        results["pydantic_ai_ms"] = min(pydantic_ms)  # no target: its objects
    except ImportError:
        pass
    return results


TARGETS: dict[str, Target] = {
    f"{name}_ms / derive_cold_ms": (
        "<=", lambda r, n=name: r[f"{n}_ms"] / r["derive_cold_ms"], 2)  # type: ignore[misc]
    for name in CONVERSIONS
}


def main() -> None:
    cli(__doc__ or "", run, TARGETS)


if __name__ == "__main__":
    main()
