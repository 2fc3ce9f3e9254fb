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
RUNS = 7


def run() -> dict[str, float]:
    appends = workload()
    sessions = []
    for _ in range(RUNS):
        s = Session("bench")
        fill(s, appends)
        sessions.append(s)
    results: dict[str, float] = {}
    derive_ms = []
    for s in sessions:
        gc.collect()
        t0 = time.perf_counter()
        messages = s.derive_messages()
        derive_ms.append((time.perf_counter() - t0) * 1000)
    results["derived_messages"] = len(messages)
    results["derive_cold_ms"] = min(derive_ms)
    for name, convert in CONVERSIONS.items():
        times = []
        for _ in range(RUNS):
            gc.collect()
            t0 = time.perf_counter()
            convert(messages)
            times.append((time.perf_counter() - t0) * 1000)
        results[f"{name}_ms"] = min(times)
    try:
        from dsh_session_core.providers import to_pydantic_ai

        to_pydantic_ai(messages[:2])  # the import, not timed
        times = []
        for _ in range(3):
            gc.collect()
            t0 = time.perf_counter()
            to_pydantic_ai(messages)
            times.append((time.perf_counter() - t0) * 1000)
        results["pydantic_ai_ms"] = min(times)  # no target: its objects
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
