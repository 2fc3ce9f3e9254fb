"""The asyncio entry points and the automatic pass: async summarizers and hook
implementations, the lock between concurrent compactions, cancellation, and the
logging of :meth:`Compactor.auto_compact`."""

from __future__ import annotations

import asyncio
import logging

import pytest
from compact_helpers import (
    CONFIG_73,
    compact_pm,
    make_store,
    nodes,
    raising,
    scenario_log,
    stub,
    text,
    types_from,
    wire,
)

from dsh_session_compact import (
    Compactor,
    SummaryRequest,
    SummaryResult,
    acompact_if_needed,
    acompact_region,
    compact_if_needed,
    compact_region,
)
from dsh_session_compact.errors import CompactionInProgressError
from dsh_session_core import hookimpl


async def _summary(request: SummaryRequest) -> SummaryResult:
    return SummaryResult(content=[text("ASYNC")])


def test_acompact_region_awaits_an_async_summarizer() -> None:
    s = scenario_log()
    result = asyncio.run(acompact_region(s, 2, 3, summarizer=_summary, model="m"))
    assert result.summary_seq == 14
    assert wire(s.events[14])["data"]["summary"] == [text("ASYNC")]
    assert nodes(s) == [15, 8, 9]


def test_acompact_region_takes_a_sync_summarizer_too() -> None:
    s = scenario_log()
    asyncio.run(acompact_region(s, 2, 3, summarizer=stub(), model="m"))
    assert nodes(s) == [15, 8, 9]


class AsyncHook:
    @hookimpl
    def compact_summarize(self, request: SummaryRequest) -> object:
        return _summary(request)


def test_an_async_hook_implementation_is_awaited_by_the_async_api_only() -> None:
    pm = compact_pm()
    pm.register(AsyncHook())
    s = scenario_log(make_store(pm))
    with pytest.raises(TypeError, match="returned an awaitable"):
        compact_region(s, 2, 3, plugin_manager=pm, model="m")
    asyncio.run(acompact_region(s, 2, 3, plugin_manager=pm, model="m"))
    assert wire(s.events[-3])["data"]["summary"] == [text("ASYNC")]


def test_a_concurrent_compaction_meets_the_lock() -> None:
    s = scenario_log()

    async def main() -> None:
        release = asyncio.Event()
        started = asyncio.Event()

        async def slow(request: SummaryRequest) -> SummaryResult:
            started.set()
            await release.wait()
            return SummaryResult(content=[text("FIRST")])

        first = asyncio.create_task(acompact_region(s, 2, 3, summarizer=slow, model="m"))
        await started.wait()  # the first holds the lock and is summarizing
        with pytest.raises(CompactionInProgressError):
            await acompact_region(s, 8, 9, summarizer=_summary, model="m")
        assert types_from(s, 13) == ["compact/start"]  # the second appended nothing
        release.set()
        await first

    asyncio.run(main())
    assert types_from(s, 13) == ["compact/start", "compact/summary", "user/message",
                                 "compact/end"]


def test_cancelling_the_task_releases_the_lock() -> None:
    s = scenario_log()

    async def main() -> None:
        started = asyncio.Event()

        async def hangs(request: SummaryRequest) -> SummaryResult:
            started.set()
            await asyncio.Event().wait()  # never set
            raise AssertionError("unreachable")

        task = asyncio.create_task(acompact_region(s, 2, 3, summarizer=hangs, model="m"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert types_from(s, 13) == ["compact/start", "compact/end"]
    assert wire(s.events[-1])["data"] == {"turn": 3, "error": "CancelledError"}
    assert nodes(s) == [2, 3, 8, 9]


def test_the_module_level_compact_if_needed_pair() -> None:
    s = scenario_log()
    result = compact_if_needed(s, config=CONFIG_73, summarizer=stub(), model="m")
    assert result is not None
    assert result.shadowed_seqs == (2, 3)
    s2 = scenario_log()
    result2 = asyncio.run(acompact_if_needed(s2, config=CONFIG_73, summarizer=_summary,
                                             model="m"))
    assert result2 is not None
    assert nodes(s2) == [15, 8, 9]


# --- the automatic pass ------------------------------------------------------------------------


def test_auto_compact_does_nothing_unless_auto() -> None:
    s = scenario_log()
    assert Compactor(CONFIG_73, summarizer=stub()).auto_compact(s, model="m") is None
    assert asyncio.run(Compactor(CONFIG_73, summarizer=stub()).aauto_compact(s, model="m")) \
        is None
    assert len(s.events) == 13  # CONFIG_73 has auto: false


def test_auto_compact_logs_the_compaction(caplog: pytest.LogCaptureFixture) -> None:
    s = scenario_log()
    compactor = Compactor({**CONFIG_73, "auto": True}, summarizer=stub())
    with caplog.at_level(logging.INFO, logger="dsh_session_compact"):
        result = compactor.auto_compact(s, model="m")
    assert result is not None
    assert caplog.messages == [
        "compaction: shadowed 2 surface nodes (seqs 2-3, ~1008 tokens) → 1120 estimated "
        "tokens after compaction"
    ]


def test_auto_compact_logs_and_swallows_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    compactor = Compactor({**CONFIG_73, "auto": True}, summarizer=raising("model unavailable"))
    s = scenario_log()
    with caplog.at_level(logging.WARNING, logger="dsh_session_compact"):
        assert compactor.auto_compact(s, model="m") is None
    s2 = scenario_log()
    with caplog.at_level(logging.WARNING, logger="dsh_session_compact"):
        assert asyncio.run(compactor.aauto_compact(s2, model="m")) is None
    assert caplog.messages == [
        "compaction failed: model unavailable; proceeding with full history"
    ] * 2
    assert wire(s.events[-1])["data"]["error"] == "model unavailable"


def test_aauto_compact_does_not_swallow_cancellation() -> None:
    s = scenario_log()

    async def cancelled(request: SummaryRequest) -> SummaryResult:
        raise asyncio.CancelledError

    compactor = Compactor({**CONFIG_73, "auto": True}, summarizer=cancelled)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(compactor.aauto_compact(s, model="m"))
    assert wire(s.events[-1])["data"]["error"] == "CancelledError"
