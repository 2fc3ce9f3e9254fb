"""The fault suites' projection check (issue 39): stores with the testing kit's contract
projection registered, and the check that a projection read never serves a stale row.

The fault, write-fault, regression and crash suites build their stores with
:func:`plugins`; where ``projecting`` is on, the store keeps the contract projection's
rows (SQLite and PostgreSQL: in the events' transaction; JSONL: in its sidecar,
written after the log), and :func:`assert_rows_are_the_fold` checks, after each fault,
kill or recovery, that what a store reads of them equals the fold of the log as the
store loads it, by the kit's model (``expected_rows``, written apart from core's fold).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsh_session_core import DurableStore, PluginManager, create_plugin_manager, to_wire
from dsh_session_core.testing.projection_contract import (
    ContractPlugin,
    contract_projection,
    expected_rows,
)

__all__ = ["NAME", "assert_rows_are_the_fold", "plugins"]

NAME = contract_projection.name


def plugins(projecting: bool = False) -> PluginManager:
    """A plugin manager without autoload; with the contract projection when
    ``projecting``."""
    pm = create_plugin_manager(autoload=False)
    if projecting:
        pm.register(ContractPlugin(), "contract")
    return pm


def _answer(store: DurableStore, sid: str) -> tuple[dict[str, str], Any, list[str]]:
    view = store.projection(sid, NAME)
    rows = {k: v.text for k, v in view.rows()}
    got = view.summary()
    newest = [k for k, _ in view.rows(newest_first=True, limit=1)]
    return rows, None if got is None else (got.seq, got.text), newest


def _the_fold(store: DurableStore, sid: str, where: str
              ) -> tuple[dict[str, str], Any, list[str]]:
    """What ``store`` must read of the projection: the model's fold of the session's log
    as ``store``'s backend loads it (a torn tail cut, a durable end obeyed)."""
    stored = store.backend.load_stored(sid, store.registry)
    assert stored is not None, f"{where}: {sid!r} is not stored"
    rows, summary = expected_rows([to_wire(e) for e in stored.events])
    return rows, summary, [max(rows)] if rows else []


def assert_rows_are_the_fold(store: DurableStore, sid: str, *,
                             fresh: Callable[[], DurableStore] | None = None,
                             where: str = "") -> dict[str, str]:
    """The contract projection of ``sid``, read by ``store`` and by a store ``fresh``
    opens (as another process would: through the stored rows, not a writer's memory),
    equals, for each, the model's fold of the log as that store loads it: never a stale
    row. The rows ``store`` reads."""
    want = _the_fold(store, sid, where)
    got = _answer(store, sid)
    # (Not a test module: pytest does not rewrite these asserts, so they say it all.)
    assert got == want, f"{where}: the store's projection read {got}, the log's fold {want}"
    if fresh is not None:
        other = fresh()
        try:
            theirs = _the_fold(other, sid, where)
            got = _answer(other, sid)
            assert got == theirs, f"{where}: a fresh store read {got}, the log's fold {theirs}"
        finally:
            other.close()
    return want[0]
