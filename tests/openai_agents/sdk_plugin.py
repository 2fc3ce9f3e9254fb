"""A pytest plugin (``-p sdk_plugin``) that runs the OpenAI Agents SDK's own session
tests with :class:`~dsh_session_openai_agents.DshSession` in place of their sessions.

Loaded before their test modules are collected, it replaces

- ``agents.SQLiteSession`` (and ``agents.memory.SQLiteSession``) by a subclass of
  ``DshSession`` taking ``SQLiteSession``'s arguments: ``db_path=":memory:"`` is a store
  of its own in memory, a file path a dsh store beside it (``DSH_OA_STORE``: ``jsonl``,
  the default, a folder ``<db_path>.dsh``; ``sqlite``, a database ``<db_path>.dsh.db``),
  so two instances on one path share history as they do on SQLite;
- their test helper ``tests.utils.simple_session.SimpleListSession`` (and its two
  subclasses), the in-memory session most of their runner tests use, by ``DshSession``
  subclasses on an in-memory store of their own.

Their files are run unmodified; ``DSH_OA_DESELECT`` (a file of node ids, one a line,
``#`` comments) deselects the tests of SQLite internals. With ``DSH_OA_KEEP_OPEN=1``
every substitute is a ``DshSession(..., keep_open=True)``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings

from dsh_session_core import DurableStore, open_store
from dsh_session_openai_agents import DshSession, fold_items, record_items

KEEP_OPEN = os.environ.get("DSH_OA_KEEP_OPEN") == "1"
#: The substitutes made, by their keep_open: reported at the end of the run, so that the
#: caller sees that they ran, and how.
MADE: dict[bool, int] = {}


def _made(session: DshSession) -> None:
    MADE[session.keep_open] = MADE.get(session.keep_open, 0) + 1


def _store_for(db_path: str | Path) -> DurableStore:
    if str(db_path) == ":memory:":
        return open_store("memory:")
    if os.environ.get("DSH_OA_STORE", "jsonl") == "sqlite":
        return open_store(f"sqlite:///{Path(db_path).resolve()}.dsh.db")
    return open_store(f"{Path(db_path).resolve()}.dsh")


class SQLiteSession(DshSession):
    """``DshSession`` under ``SQLiteSession``'s name and constructor."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        super().__init__(session_id, store=_store_for(db_path),
                         session_settings=session_settings, keep_open=KEEP_OPEN)
        _made(self)
        self._owns_store = True
        self.db_path = db_path
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            msg = "SQLiteSession is closed"
            raise RuntimeError(msg)

    async def get_items(self, limit: int | None = None, **kw: Any) -> list[TResponseInputItem]:
        self._check()
        return await super().get_items(limit, **kw)

    async def add_items(self, items: list[TResponseInputItem], **kw: Any) -> None:
        self._check()
        await super().add_items(items, **kw)

    def close(self) -> None:
        self._closed = True
        super().close()


class SimpleListSession(DshSession):
    """``DshSession`` under the name and constructor of their in-memory test session."""

    def __init__(self, session_id: str = "test",
                 history: list[TResponseInputItem] | None = None) -> None:
        super().__init__(session_id, store=open_store("memory:"), keep_open=KEEP_OPEN)
        _made(self)
        self._ignore_ids_for_matching = False
        if history:
            live = self.store.create(session_id)
            record_items(live, list(history))
            self.store.release(live)

    @property
    def saved_items(self) -> list[TResponseInputItem]:
        """The items, read synchronously (their tests inspect them)."""
        live = self.store.get(self.session_id)
        if live is not None:
            return cast(list[TResponseInputItem], [i for _, i in fold_items(live.events)])
        if self.session_id not in {h.id for h in self.store.stored()}:
            return []
        live = self.store.open(self.session_id)
        try:
            return cast(list[TResponseInputItem], [i for _, i in fold_items(live.events)])
        finally:
            self.store.release(live)


class CountingSession(SimpleListSession):
    """Counts ``pop_item`` calls, as theirs does."""

    def __init__(self, session_id: str = "test",
                 history: list[TResponseInputItem] | None = None) -> None:
        super().__init__(session_id=session_id, history=history)
        self.pop_calls = 0

    async def pop_item(self, **kw: Any) -> TResponseInputItem | None:
        self.pop_calls += 1
        return await super().pop_item(**kw)


class IdStrippingSession(CountingSession):
    """Strips ids on add, as theirs does."""

    def __init__(self, session_id: str = "test",
                 history: list[TResponseInputItem] | None = None) -> None:
        super().__init__(session_id=session_id, history=history)
        self._ignore_ids_for_matching = True

    async def add_items(self, items: list[TResponseInputItem], **kw: Any) -> None:
        clean = [cast(TResponseInputItem, {k: v for k, v in cast(dict[str, Any], i).items()
                                           if k != "id"}) if isinstance(i, dict) else i
                 for i in items]
        await super().add_items(clean, **kw)


def pytest_configure(config: pytest.Config) -> None:
    """Substitute the sessions before any of their test modules is imported."""
    import agents
    import agents.memory

    agents.SQLiteSession = SQLiteSession  # type: ignore[misc,assignment]
    agents.memory.SQLiteSession = SQLiteSession  # type: ignore[misc,assignment]
    sys.path.insert(0, str(config.rootpath))
    import importlib

    simple: Any = importlib.import_module("tests.utils.simple_session")  # their helper

    simple.SimpleListSession = SimpleListSession
    simple.CountingSession = CountingSession
    simple.IdStrippingSession = IdStrippingSession


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the listed tests of SQLite internals."""
    listed = os.environ.get("DSH_OA_DESELECT")
    if not listed:
        return
    names = {line.split("#")[0].strip() for line in Path(listed).read_text().splitlines()}
    names.discard("")
    keep = [item for item in items if item.nodeid not in names]
    dropped = [item for item in items if item.nodeid in names]
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line: how many substitutes were made, with and without keep_open."""
    terminalreporter.write_line(
        f"sdk_plugin: DshSession substitutes: keep_open={MADE.get(True, 0)} "
        f"default={MADE.get(False, 0)}")
