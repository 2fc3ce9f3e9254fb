"""The integrations as plugins: each framework integration passes the testing kit's
plugin check (entry point, block list, catalog lines, errors, ``py.typed``, ``__all__``)
as the bundled plugins do, and registers exactly its own namespace's event types."""

from __future__ import annotations

import pytest

from dsh_session_core.testing import check_plugin

# entry-point name -> (package, the event types it registers), written out by hand
INTEGRATIONS = {
    "adk": ("dsh_session_adk", ("adk/deleted", "adk/event", "adk/session", "adk/state")),
    "claude-agent": ("dsh_session_claude_agent", ("claude-agent/entries",
                                                  "claude-agent/summary")),
    "langgraph": ("dsh_session_langgraph", ("langgraph/checkpoint", "langgraph/removed",
                                            "langgraph/resume", "langgraph/writes")),
    "openai-agents": ("dsh_session_openai_agents",
                      ("agents/clear", "agents/item", "agents/pop")),
    "pydantic-ai": ("dsh_session_pydantic_ai",
                    ("pydantic-ai/deleted", "pydantic-ai/entry", "pydantic-ai/record")),
}

# The plugins as a user's installation loads them, whatever this shell's switches say.
pytestmark = pytest.mark.usefixtures("plugins_as_installed")


@pytest.mark.parametrize("name", sorted(INTEGRATIONS))
def test_the_plugin_check_passes(name: str) -> None:
    package, types = INTEGRATIONS[name]
    report = check_plugin(name)
    assert report.package == package
    assert report.event_types == types
