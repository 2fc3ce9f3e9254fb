"""The package's shape (style anchors §4): a pinned public API, private implementation
modules, a typed marker, and imports of core's public names only."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import dsh_session_compact
import dsh_session_compact.plugin as compact_plugin

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


def test_the_entry_point_module_holds_hook_implementations_only() -> None:
    functions = [f for _, f in inspect.getmembers(compact_plugin, inspect.isfunction)
                 if f.__module__ == compact_plugin.__name__]
    assert {f.__name__ for f in functions} == {"register_event_types", "add_hookspecs"}
    assert all(hasattr(f, "dsh_session_impl") for f in functions)


def test_only_public_core_names_are_imported() -> None:
    offences = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
                if node.module == "dsh_session_core":
                    modules += [f"dsh_session_core.{a.name}" for a in node.names]
            for name in modules:
                parts = name.split(".")
                if parts[0] == "dsh_session_core" and any(p.startswith("_") for p in parts[1:]):
                    offences.append(f"{path.name}: {name}")
                if parts[0].startswith("dsh_session_") and parts[0] not in (
                    "dsh_session_core", "dsh_session_compact"
                ):
                    offences.append(f"{path.name}: {name}")
    assert offences == []
