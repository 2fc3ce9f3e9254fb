"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``)
on ``DshCheckpointSaver``, on each durable store kind: it must report ``FULL`` with all
eight capabilities detected and passed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from dsh_session_langgraph import DshCheckpointSaver

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")


def test_the_conformance_suite_reports_full_with_all_eight_capabilities(
        store_url: str) -> None:
    async def saver() -> AsyncGenerator[DshCheckpointSaver, None]:
        # One store for the whole run, a fresh saver (and store object) per capability.
        checkpointer = DshCheckpointSaver(store_url)
        try:
            yield checkpointer
        finally:
            await checkpointer.aclose()

    registered = checkpointer_test(name=f"DshCheckpointSaver[{store_url.split(':')[0]}]")(
        saver)
    report = asyncio.run(validate(registered))
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert failures == {}
    assert {name for name, r in report.results.items() if r.detected} == {
        c.value for c in ALL_CAPABILITIES}
    assert len(ALL_CAPABILITIES) == 8
    assert all(r.passed is True for r in report.results.values())
    assert report.conformance_level() == "FULL"
