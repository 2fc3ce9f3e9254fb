"""dsh-session as the session store of the Claude Agent SDK: :class:`DshSessionStore`,
the SDK's ``SessionStore`` protocol on any dsh-session store, and the plugin's event
types.

::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from dsh_session_claude_agent import DshSessionStore

    store = DshSessionStore("sqlite:///claude.db")
    async for message in query(prompt="hello",
                               options=ClaudeAgentOptions(session_store=store)):
        ...
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (every store and
# CLI command does) must not import the SDK.
if _typing.TYPE_CHECKING:
    from ._keys import dsh_session_id
    from ._store import DshSessionStore
    from .events import ClaudeEntries, ClaudeEntriesData, ClaudeSummary, ClaudeSummaryData

_LAZY: dict[str, str] = {
    "ClaudeEntries": ".events",
    "ClaudeEntriesData": ".events",
    "ClaudeSummary": ".events",
    "ClaudeSummaryData": ".events",
    "DshSessionStore": "._store",
    "dsh_session_id": "._keys",
}

__all__ = [
    "ClaudeEntries",
    "ClaudeEntriesData",
    "ClaudeSummary",
    "ClaudeSummaryData",
    "DshSessionStore",
    "dsh_session_id",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__,
                                     distribution="dsh-session-claude-agent")
