"""The Claude Agent SDK's own ``SessionStore`` conformance suite
(``claude_agent_sdk.testing.run_session_store_conformance``), unmodified, on
``DshSessionStore`` with every optional method, on each kind of store: memory, JSONL,
SQLite and PostgreSQL (a fresh store for each of the suite's contracts, as it asks)."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from pathlib import Path

import pytest
from claude_agent_sdk import SessionStore
from claude_agent_sdk.testing import run_session_store_conformance

from dsh_session_claude_agent import DshSessionStore

pytestmark = pytest.mark.store_kinds("memory", "jsonl", "sqlite", "postgresql", "redis")

OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")


def test_the_sdk_conformance_suite_passes_with_every_optional_method(
        store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    numbers = itertools.count()
    made: list[DshSessionStore] = []
    databases = (request.getfixturevalue("postgresql_databases")
                 if store_kind == "postgresql" else None)

    def fresh_url() -> str:
        n = next(numbers)
        if store_kind == "jsonl":
            return str(tmp_path / f"s{n}")
        if store_kind == "sqlite":
            return f"sqlite:///{tmp_path}/s{n}.db"
        if store_kind == "memory":
            return "memory:"
        if store_kind == "redis":  # a fresh key prefix on the run's server
            server = request.getfixturevalue("redis_server")
            return f"{server}?prefix=claude{n}-{uuid.uuid4().hex[:8]}:"
        assert databases is not None
        url: str = databases.create(f"claude{n}")
        request.addfinalizer(lambda: databases.drop(url))
        return url

    def make() -> DshSessionStore:
        store = DshSessionStore(fresh_url())
        made.append(store)
        return store

    try:
        asyncio.run(run_session_store_conformance(make))
    finally:
        for store in made:
            store.close()
    # Every optional method was run, none skipped: each is DshSessionStore's own.
    assert all(getattr(DshSessionStore, m) is not getattr(SessionStore, m) for m in OPTIONAL)
    assert len(made) >= 14
