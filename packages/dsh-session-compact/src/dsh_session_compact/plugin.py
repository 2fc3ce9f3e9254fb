"""The ``compact`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only.

It contributes the ``compact/*`` event types and publishes the ``compact_summarize``
hookspec. It deliberately implements no summarizer: registering
:class:`~dsh_session_compact.ExtractiveSummarizer` (or your own) is an explicit choice.
"""

from __future__ import annotations

from collections.abc import Iterable

import pluggy

from dsh_session_core import EventSpec, hookimpl

from . import hookspecs
from .events import CompactEnd, CompactStart, CompactSummary


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    return (EventSpec(CompactStart), EventSpec(CompactSummary), EventSpec(CompactEnd))


@hookimpl
def add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    # A manager that already has the spec (the plugin registered twice under two names,
    # say) would refuse it a second time.
    caller = getattr(plugin_manager.hook, "compact_summarize", None)
    if caller is None or caller.spec is None:
        plugin_manager.add_hookspecs(hookspecs)
