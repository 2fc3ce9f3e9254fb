"""Item views written before the item view was a projection (efe64e2, issue 39) keep
loading: ``get_items`` gives what it gave then, whole and by ``limit``, from a reader
that finds no rows (it folds the log) and after a writer's first open built them; the
session goes on. The stores and how they were made: ``old_items_support.py``."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any, cast

import pytest
from old_items_support import HERE, SESSION, urls

from dsh_session_core import open_store
from dsh_session_openai_agents import DshSession
from dsh_session_openai_agents._projection import ITEMS

EXPECTED: list[Any] = json.loads((HERE / "items.json").read_text()) if HERE.is_dir() else []


@pytest.fixture
def stores(tmp_path: Path) -> dict[str, str]:
    """A copy of the old stores (a test never changes the fixture)."""
    shutil.copytree(HERE, tmp_path / "old")
    return urls(tmp_path / "old")


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_item_view_stored_before_projections_reads_and_goes_on(
    stores: dict[str, str], kind: str
) -> None:
    url = stores[kind]
    assert len(EXPECTED) == 5
    with open_store(url) as store:  # a reader: no rows stored, the log is folded
        view = store.projection(SESSION, ITEMS.name)
        assert view.folded == view.covers > 0
        assert [row.item for _, row in view.rows()] == EXPECTED

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        session = DshSession(SESSION, store=url)
        whole = list(await session.get_items())
        newest = list(await session.get_items(limit=2))
        await session.add_items(cast(Any, [{"role": "user", "content": "Thanks."}]))
        after = list(await session.get_items())
        await session.aclose()
        return whole, newest, after

    whole, newest, after = asyncio.run(main())
    assert whole == EXPECTED
    assert newest == EXPECTED[-2:]
    assert after == [*EXPECTED, {"role": "user", "content": "Thanks."}]
    with open_store(url) as store:  # the write's open built the rows of the old items
        view = store.projection(SESSION, ITEMS.name)
        assert view.folded == 0
        assert [row.item for _, row in view.rows()] == after

    async def reread() -> list[Any]:
        session = DshSession(SESSION, store=url)
        try:
            return list(await session.get_items())
        finally:
            await session.aclose()

    assert asyncio.run(reread()) == after
