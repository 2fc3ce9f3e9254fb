"""dsh-session plugin ``compact``: compaction of a surface range into a summary.

Compaction replaces the head of a long history with one checkpoint ``user/message``
holding a summary; the shadowed events stay in the log, so replaying the log derives
the same messages. The plugin contributes the ``compact/*`` events (the lock and the
provenance), the ``compact_summarize`` hook, transcript rendering, token estimation,
and the basic backend::

    from dsh_session_core import SessionStore
    from dsh_session_compact import Compactor, ExtractiveSummarizer

    store = SessionStore()  # loads the installed plugins, `compact` among them
    store.plugin_manager.register(ExtractiveSummarizer())  # or your LLM summarizer
    compactor = Compactor(
        {"contextWindow": 128_000, "thresholdRatio": 0.8, "retainTokens": 20_000,
         "summarizationModel": "", "maxTokens": 8192, "compactionRetries": 1},
        plugin_manager=store.plugin_manager,
    )
    # before each step of a turn:
    compactor.auto_compact(session, system_prompt=system, model="my-model")

See :func:`compact_region` for the rules a compaction follows.
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (and so
# every store and CLI command) does not pay for what it does not use.
if _typing.TYPE_CHECKING:
    from . import errors, events, hookspecs
    from ._compactor import Compactor, acompact_if_needed, compact_if_needed
    from ._config import BasicCompactConfig, resolve_config
    from ._extractive import ExtractiveSummarizer
    from ._framing import PREAMBLE, frame_summary
    from ._region import CHECKPOINT_SOURCE, CompactionResult, acompact_region, compact_region
    from ._render import render_content_blocks, render_transcript
    from ._scan import compaction_in_progress, open_turn
    from ._summarizer import (
        SUMMARIZATION_SYSTEM_PROMPT,
        Summarizer,
        SummaryRequest,
        SummaryResult,
        summary_prompt,
    )
    from ._tokens import TokenEstimator
    from .events import ShadowedRange

_LAZY: dict[str, str] = {
    "BasicCompactConfig": "._config",
    "CHECKPOINT_SOURCE": "._region",
    "CompactionResult": "._region",
    "Compactor": "._compactor",
    "ExtractiveSummarizer": "._extractive",
    "PREAMBLE": "._framing",
    "SUMMARIZATION_SYSTEM_PROMPT": "._summarizer",
    "ShadowedRange": ".events",
    "Summarizer": "._summarizer",
    "SummaryRequest": "._summarizer",
    "SummaryResult": "._summarizer",
    "TokenEstimator": "._tokens",
    "acompact_if_needed": "._compactor",
    "acompact_region": "._region",
    "compact_if_needed": "._compactor",
    "compact_region": "._region",
    "compaction_in_progress": "._scan",
    "errors": ".errors",
    "events": ".events",
    "frame_summary": "._framing",
    "hookspecs": ".hookspecs",
    "open_turn": "._scan",
    "render_content_blocks": "._render",
    "render_transcript": "._render",
    "resolve_config": "._config",
    "summary_prompt": "._summarizer",
}

__all__ = [
    "CHECKPOINT_SOURCE",
    "PREAMBLE",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "BasicCompactConfig",
    "CompactionResult",
    "Compactor",
    "ExtractiveSummarizer",
    "ShadowedRange",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "TokenEstimator",
    "acompact_if_needed",
    "acompact_region",
    "compact_if_needed",
    "compact_region",
    "compaction_in_progress",
    "errors",
    "events",
    "frame_summary",
    "hookspecs",
    "open_turn",
    "render_content_blocks",
    "render_transcript",
    "resolve_config",
    "summary_prompt",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-compact")
