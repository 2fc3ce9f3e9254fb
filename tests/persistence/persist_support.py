"""Shared pieces of the persistence tests: the spec's log fixtures, in the kit's terms.

The stores of every kind, and the factories of fresh backends over one storage, are the
testing kit's (``dsh_session_core.testing``: the ``backend_factory`` fixture, which
tests/conftest.py also names ``storage``).
"""

from __future__ import annotations

from typing import Any

from dsh_session_core.testing import (
    USER_SOURCE,
    BackendFactory,
    one_turn_log,
    session_header,
    turn_end_data,
    turn_start_data,
    wire_event,
)

Factory = BackendFactory

#: The spec's ``meta(id, cwd?)``: ``{version: 0, id, createdAt: 1000[, cwd]}``.
meta = session_header

USER = dict(USER_SOURCE)


def TS(seq: int, turn: int, time: int | None = None) -> dict[str, Any]:
    return wire_event("turn/start", seq, turn_start_data(turn), time=time)


def TE(seq: int, turn: int, kind: str = "completed", time: int | None = None) -> dict[str, Any]:
    return wire_event("turn/end", seq, turn_end_data(turn, {"kind": kind}), time=time)


# The §9.2 one-turn log: seqs 0-5, time = seq + 1.
ONE_TURN: list[dict[str, Any]] = one_turn_log()
