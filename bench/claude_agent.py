"""Bytes of a Claude Agent SDK transcript stored through ``DshSessionStore``
(dsh-session-claude-agent), against the SDK's own transcript file, measured in one run.

The workload is ``tests/claude_agent/sdk_transcript.py``'s: a run of turns shaped as the
SDK's CLI writes them (a prompt; thinking with its signature, a text and a tool use, one
entry a block; the tool's result with the CLI's ``toolUseResult``; a final answer; a
file-history snapshot a turn). The SDK's file is those entries, one compact JSON line
each. The store's bytes are the session's log on JSONL (the entries' residuals, the
typed events holding their content, the turns and steps, the SDK's summary); the
store's projection sidecar (a SQLite file shared by every session of the store) is
printed apart. Appends as the SDK's default (``batched``) mirror makes them, one a turn,
and as its ``eager`` mode at its most (one entry an append). Each load is checked to
give back the entries byte for byte (or the figures mean nothing).

    python bench/claude_agent.py                  # 20, 100 and 500 turns
    python bench/claude_agent.py --turns 100

The target (issue 40): the log at most 1.2 times the SDK's file, in the default mode.
A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "claude_agent"))

from sdk_transcript import jsonl, transcript, turn_batches

from dsh_session_claude_agent import DshSessionStore

TARGET = 1.2
KEY: Any = {"project_key": "-home-user-project",
            "session_id": "4f1c2b1e-9a1d-4c55-8e38-2b8f6f0c7a10"}


def _measure(entries: list[dict[str, Any]], batches: list[list[Any]]) -> tuple[int, int]:
    """The log's bytes and the sidecar's, for ``entries`` appended as ``batches``."""
    folder = Path(tempfile.mkdtemp())

    async def run() -> list[Any] | None:
        async with DshSessionStore(str(folder)) as store:
            for batch in batches:
                await store.append(KEY, batch)
            return await store.load(KEY)

    loaded = asyncio.run(run())
    if loaded is None or jsonl(loaded) != jsonl(entries):
        msg = "the store did not give the entries back"
        raise SystemExit(msg)
    logs = sum(p.stat().st_size for p in folder.rglob("*.jsonl"))
    sidecar = sum(p.stat().st_size for p in folder.rglob("*")
                  if p.is_file() and ".projections" in p.parts)
    return logs, sidecar


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="*", default=[20, 100, 500])
    args = parser.parse_args()
    print(f"{'turns':>6} {'SDK file':>10} {'mode':>8} {'dsh log':>10} {'ratio':>6} "
          f"{'target':>6} {'sidecar':>8}")
    for turns in args.turns:
        entries = transcript(turns)
        sdk = len(jsonl(entries))
        for mode, batches in (("batched", turn_batches(entries)),
                              ("eager", [[e] for e in entries])):
            logs, sidecar = _measure(entries, batches)
            target = f"{TARGET:.1f}x" if mode == "batched" else "-"
            print(f"{turns:>6} {sdk:>10,} {mode:>8} {logs:>10,} {logs / sdk:>5.2f}x "
                  f"{target:>6} {sidecar:>8,}")


if __name__ == "__main__":
    main()
