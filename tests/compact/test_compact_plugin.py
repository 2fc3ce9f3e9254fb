"""The plugin as installed: found through its entry point, blocked by name, publishing the
``compact_summarize`` hook; and the summarizer wiring (argument, compactor, hook, the
shipped ExtractiveSummarizer)."""

from __future__ import annotations

import pluggy
import pytest
from compact_helpers import (
    TS,
    U,
    compact_pm,
    make_store,
    nodes,
    scenario_log,
    stub,
    text,
    types_from,
)

import dsh_session_compact.errors as compact_errors
import dsh_session_compact.plugin as compact_plugin
from dsh_session_compact import (
    Compactor,
    ExtractiveSummarizer,
    SummaryRequest,
    SummaryResult,
    compact_region,
)
from dsh_session_compact.errors import NoSummarizerError, SummarizationError
from dsh_session_core import (
    OpaqueEvent,
    PluginManager,
    SessionStore,
    create_plugin_manager,
    hookimpl,
    to_wire,
)
from dsh_session_core.testing import check_plugin
from dsh_session_core.vocabulary import TextBlock

COMPACT_TYPES = {"compact/start", "compact/summary", "compact/end"}


# --- discovery ----------------------------------------------------------------------------


def test_the_plugin_check_passes() -> None:
    # The kit's check: the entry point, the registration, the block list, the errors.
    report = check_plugin("compact")
    assert report.plugin is compact_plugin
    assert report.errors is compact_errors
    assert set(report.event_types) == COMPACT_TYPES
    assert all(not report.entry(t).surface for t in COMPACT_TYPES)


def test_the_plugin_publishes_its_hook() -> None:
    pm = create_plugin_manager()
    assert pm.hook.compact_summarize.spec is not None


def test_blocking_the_plugin_removes_its_event_types_and_hook() -> None:
    pm = create_plugin_manager(blocked=["compact"])
    assert pm.get_plugin("compact") is None
    assert COMPACT_TYPES.isdisjoint(SessionStore(pm).registry.types)
    caller = getattr(pm.hook, "compact_summarize", None)
    assert caller is None or caller.spec is None


def test_the_catalog_doc_lines_are_the_reference_wording() -> None:
    registry = make_store().registry
    assert registry.get("compact/start").doc == (  # type: ignore[union-attr]
        "Marks the start of a compaction — log-only, holds the lock until `compact/end`."
    )
    assert registry.get("compact/end").doc == (  # type: ignore[union-attr]
        "Marks the end of a compaction — log-only, releases the lock. `error` set if "
        "summarization failed."
    )
    assert registry.get("compact/summary").doc.startswith(  # type: ignore[union-attr]
        "Provenance record of a completed summarization — log-only, no surfaceOp. The summary "
        "content is in `data.summary`; the actual surface replacement is performed by a "
        "subsequent `user/message` event that shadows the compacted range."
    )


def test_adding_the_hookspecs_twice_is_harmless() -> None:
    pm = compact_pm()
    compact_plugin.add_hookspecs(pm)  # the historic call already added them
    assert pm.hook.compact_summarize.spec is not None


def test_compaction_works_without_the_plugin_its_events_are_then_opaque() -> None:
    # Without the plugin its types are foreign: the strict default would refuse them.
    store = make_store(create_plugin_manager(autoload=False), foreign_types=["compact/*"])
    s = scenario_log(store)
    compact_region(s, 2, 3, summarizer=stub(), model="test-model")
    assert all(isinstance(e, OpaqueEvent) for e in (s.events[13], s.events[14], s.events[16]))
    assert types_from(s, 13) == ["compact/start", "compact/summary", "user/message",
                                 "compact/end"]
    assert nodes(s) == [15, 8, 9]
    # The lock is read off type strings, so it holds on opaque events too.
    s.append("compact/start", {"turn": 3})
    with pytest.raises(Exception, match="compaction already in progress"):
        compact_region(s, 15, 15, summarizer=stub(), model="test-model")


# --- the hook ------------------------------------------------------------------------------


class Declines:
    """Implements the hook and always lets another implementation answer."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def compact_summarize(self, request: SummaryRequest) -> SummaryResult | None:
        self.calls += 1
        return None


class Answers:
    def __init__(self, summary: str) -> None:
        self.summary = summary

    @hookimpl(trylast=True)
    def compact_summarize(self, request: SummaryRequest) -> SummaryResult | None:
        return SummaryResult(content=[text(self.summary)], model=f"hook:{request.model}")


def _pm_with(*plugins: object) -> PluginManager:
    pm = compact_pm()
    for plugin in plugins:
        pm.register(plugin)
    return pm


def test_the_hook_summarizes_when_no_summarizer_is_given() -> None:
    declines = Declines()
    pm = _pm_with(Answers("FROM HOOK"), declines)
    s = scenario_log(make_store(pm))
    compact_region(s, 2, 3, plugin_manager=pm, model="m")
    data = to_wire(s.events[14])["data"]
    assert (data["summary"], data["model"]) == ([text("FROM HOOK")], "hook:m")
    assert declines.calls == 1  # asked first, declined, the next one answered


def test_an_explicit_summarizer_wins_over_the_hook() -> None:
    declines = Declines()
    pm = _pm_with(declines)
    s = scenario_log(make_store(pm))
    compact_region(s, 2, 3, summarizer=stub("EXPLICIT"), plugin_manager=pm, model="m")
    assert to_wire(s.events[14])["data"]["summary"] == [text("EXPLICIT")]
    assert declines.calls == 0


def test_the_compactor_s_summarizer_wins_over_the_hook_and_the_call_s_over_both() -> None:
    pm = _pm_with(Answers("FROM HOOK"))
    config = {"contextWindow": 4000, "thresholdRatio": 0.5, "retainTokens": 600,
              "summarizationModel": "", "maxTokens": 10, "compactionRetries": 0}
    s = scenario_log(make_store(pm))
    Compactor(config, summarizer=stub("OWN"), plugin_manager=pm).compact_region(s, 2, 3, model="m")
    assert to_wire(s.events[14])["data"]["summary"] == [text("OWN")]
    Compactor(config, summarizer=stub("OWN"), plugin_manager=pm).compact_region(
        s, 15, 9, model="m", summarizer=stub("CALL")
    )
    assert to_wire(s.events[18])["data"]["summary"] == [text("CALL")]


def test_every_implementation_declining_fails_and_releases_the_lock() -> None:
    pm = _pm_with(Declines())
    s = scenario_log(make_store(pm))
    with pytest.raises(SummarizationError) as info:
        compact_region(s, 2, 3, plugin_manager=pm, model="m")
    assert info.value.code == "NO_SUMMARY"
    assert types_from(s, 13) == ["compact/start", "compact/end"]


def test_no_summarizer_at_all_is_refused_before_anything_is_appended() -> None:
    for pm in (None, compact_pm()):
        s = scenario_log()
        with pytest.raises(NoSummarizerError, match="no summarizer") as info:
            compact_region(s, 2, 3, plugin_manager=pm, model="m")
        assert info.value.code == "NO_SUMMARIZER"
        assert len(s.events) == 13


def test_an_implementation_without_the_hookspec_says_what_to_register() -> None:
    pm = create_plugin_manager(autoload=False)
    pm.register(ExtractiveSummarizer())
    s = scenario_log()
    with pytest.raises(NoSummarizerError, match="register the 'compact' plugin"):
        compact_region(s, 2, 3, plugin_manager=pm, model="m")
    assert len(s.events) == 13


def test_the_hook_is_firstresult() -> None:
    pm = _pm_with(Answers("A"))
    request = SummaryRequest(transcript="t", model="m", max_tokens=None, session_id="s",
                             shadowed_seqs=())
    result = pm.hook.compact_summarize(request=request)
    assert isinstance(result, SummaryResult)
    with pytest.raises(pluggy.PluginValidationError):
        pm.register(type("Bad", (), {"compact_summarize": hookimpl(lambda self, nope: None)})())


# --- the shipped deterministic summarizer ---------------------------------------------------


def test_the_extractive_summarizer_keeps_the_first_line_of_each_entry() -> None:
    summarizer = ExtractiveSummarizer(max_line_chars=20)
    assert summarizer.summarize("User: hello\nmore\n\nAssistant: a rather long answer here") == (
        "- User: hello\n- Assistant: a rather…"  # 19 characters and the ellipsis
    )
    assert summarizer.summarize("") == ""


def test_the_extractive_summarizer_compacts_the_scenario_log() -> None:
    pm = _pm_with(ExtractiveSummarizer())
    s = scenario_log(make_store(pm))
    result = compact_region(s, 2, 3, plugin_manager=pm, model="test-model")
    line_user = "- User: " + "x" * 73 + "…"
    line_assistant = "- Assistant: " + "y" * 68 + "…"
    assert to_wire(result)["summary"] == [text(f"{line_user}\n{line_assistant}")]
    assert to_wire(s.events[14])["data"]["model"] == "test-model"
    assert ExtractiveSummarizer(model="extractive")(
        SummaryRequest(transcript="User: hi", model="m", max_tokens=None, session_id="s",
                       shadowed_seqs=())
    ) == SummaryResult(content=[TextBlock(text="- User: hi")], model="extractive")


def test_the_extractive_summarizer_on_nothing_gives_an_empty_summary() -> None:
    s = make_store().create()
    TS(s, 1)
    U(s, "")
    U(s, "x" * 2000)
    with pytest.raises(SummarizationError) as info:
        compact_region(s, 1, 1, summarizer=ExtractiveSummarizer(), model="m")
    assert info.value.code == "EMPTY_SUMMARY"


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_the_extractive_summarizer_needs_a_positive_line_length(bad: object) -> None:
    with pytest.raises(ValueError, match="max_line_chars must be a positive integer"):
        ExtractiveSummarizer(max_line_chars=bad)  # type: ignore[arg-type]
