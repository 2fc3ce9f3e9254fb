"""The package's shape (style anchors §4): a pinned public API, private implementation
modules, a typed marker, and imports of core's public names only."""

from __future__ import annotations

from pathlib import Path

import dsh_session_compact

SRC = Path(dsh_session_compact.__file__).parent
PUBLIC_MODULES = {"__init__", "errors", "events", "hookspecs", "plugin"}


def test_the_public_api_is_pinned() -> None:
    assert dsh_session_compact.__all__ == [
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
    for name in dsh_session_compact.__all__:
        assert hasattr(dsh_session_compact, name), name


def test_every_submodule_declares_what_it_exports() -> None:
    for module in (dsh_session_compact.errors, dsh_session_compact.events):
        for name in module.__all__:
            assert hasattr(module, name), name


def test_implementation_modules_are_private_and_the_package_is_typed() -> None:
    for path in SRC.glob("*.py"):
        assert path.stem.startswith("_") or path.stem in PUBLIC_MODULES, path.stem
    assert (SRC / "py.typed").is_file()
