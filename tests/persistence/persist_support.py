"""Shared pieces of the persistence tests: backend factories, the spec's log fixtures.

A new backend is tested by adding one entry to ``BACKENDS``: a factory that opens a
fresh backend instance over the storage of one test (as a second process would). The
``storage`` fixture (in tests/conftest.py) runs every contract test on each of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import SessionHeader
from dsh_session_core._persistence.base import Backend

Factory = Callable[[], Backend]


def _memory(request: pytest.FixtureRequest, tmp: Path) -> Factory:
    from dsh_session_core._persistence.memory import MemoryBackend

    shared = MemoryBackend()  # the storage is the object itself
    return lambda: shared


def _jsonl(request: pytest.FixtureRequest, tmp: Path) -> Factory:
    module: Any = importlib.import_module("dsh_session_core._persistence.jsonl")
    return lambda: module.JsonlBackend(tmp / "root")


def _jsonl_zstd(request: pytest.FixtureRequest, tmp: Path) -> Factory:
    module: Any = importlib.import_module("dsh_session_core._persistence.jsonl_zstd")
    return lambda: module.JsonlZstdBackend(tmp / "root")


def _sqlite(request: pytest.FixtureRequest, tmp: Path) -> Factory:
    module: Any = importlib.import_module("dsh_session_core._persistence.sqlite")
    return lambda: module.SqliteBackend(tmp / "sessions.db")


def _postgresql(request: pytest.FixtureRequest, tmp: Path) -> Factory:
    """Backends over a fresh database of the test server; each is closed after the test
    (tests leave them open, as a process that exits would)."""
    from dsh_session_core._persistence.postgres import PostgresBackend

    url = request.getfixturevalue("postgresql_url")
    made: list[PostgresBackend] = []

    def factory() -> Backend:
        made.append(PostgresBackend(url))
        return made[-1]

    def close_all() -> None:
        for backend in made:
            backend.close()

    request.addfinalizer(close_all)
    return factory


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Factory]] = {
    "memory": _memory,
    "jsonl": _jsonl,
    "jsonl+zstd": _jsonl_zstd,
    "sqlite": _sqlite,
    "postgresql": _postgresql,
}


def meta(session_id: str, cwd: str | None = None, **extra: Any) -> SessionHeader:
    """The spec's ``meta(id, cwd?)``: ``{version: 0, id, createdAt: 1000[, cwd]}``."""
    fields: dict[str, Any] = {"version": 0, "id": session_id, "created_at": 1000}
    if cwd is not None:
        fields["cwd"] = cwd
    fields.update(extra)
    return SessionHeader(**fields)


USER = {"kind": "user"}


def TS(seq: int, turn: int, time: int | None = None) -> dict[str, Any]:
    return {"type": "turn/start", "seq": seq, "time": seq + 1 if time is None else time,
            "data": {"turn": turn, "trigger": {"kind": "message", "source": USER}}}


def TE(seq: int, turn: int, kind: str = "completed", time: int | None = None) -> dict[str, Any]:
    return {"type": "turn/end", "seq": seq, "time": seq + 1 if time is None else time,
            "data": {"turn": turn, "reason": {"kind": kind}}}


# The §9.2 one-turn log: seqs 0-5, time = seq + 1.
ONE_TURN: list[dict[str, Any]] = [
    TS(0, 1),
    {"type": "user/message", "seq": 1, "time": 2,
     "data": {"content": [{"type": "text", "text": "hi"}], "source": USER},
     "surfaceOp": "append"},
    {"type": "step/start", "seq": 2, "time": 3, "data": {"turn": 1, "step": 1}},
    {"type": "assistant/message", "seq": 3, "time": 4,
     "data": {"turn": 1, "step": 1, "content": [{"type": "text", "text": "hello"}]},
     "surfaceOp": "append"},
    {"type": "step/end", "seq": 4, "time": 5, "data": {"turn": 1, "step": 1}},
    TE(5, 1, time=6),
]
