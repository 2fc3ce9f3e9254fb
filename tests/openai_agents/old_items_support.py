"""The stores of ``tests/openai_agents/old_items/``, and how they were made: item views
written by ``DshSession`` before the item view was a projection (run at commit efe64e2
of main, issue 39), on a JSONL folder and a SQLite file, with the items ``get_items``
gave then (``items.json``). Running it again with today's code would write projection
rows beside the logs::

    python tests/openai_agents/old_items_support.py
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "old_items"
SESSION = "old-items"

#: What the session went through: adds (items as the SDK stores them), a pop, adds.
ADDS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "What is the weather in Paris?"}],
    [{"type": "function_call", "call_id": "c1", "name": "weather",
      "arguments": "{\"city\": \"Paris\"}"},
     {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
     {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]}],
    [{"role": "user", "content": "And in Oslo?"}],
]
AFTER_POP: list[dict[str, Any]] = [{"role": "user", "content": "And in Oslo, tomorrow?"}]


def urls(root: Path) -> dict[str, str]:
    """The store URL of each kind under ``root``."""
    return {"jsonl": str(root / "jsonl"), "sqlite": f"sqlite:///{root / 'items.db'}"}


async def _write(url: str) -> list[Any]:
    from dsh_session_openai_agents import DshSession

    session = DshSession(SESSION, store=url)
    for items in ADDS:
        await session.add_items(items)  # type: ignore[arg-type]
    await session.pop_item()
    await session.add_items(AFTER_POP)  # type: ignore[arg-type]
    got: list[Any] = list(await session.get_items())
    await session.aclose()
    return got


def main() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    HERE.mkdir()
    got = {kind: asyncio.run(_write(url)) for kind, url in urls(HERE).items()}
    assert got["jsonl"] == got["sqlite"]
    (HERE / "items.json").write_text(json.dumps(got["jsonl"], indent=1) + "\n")


if __name__ == "__main__":
    main()
