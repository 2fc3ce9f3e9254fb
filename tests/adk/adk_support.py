"""The differential every ADK test rests on: one scenario run on ADK's own
``InMemorySessionService`` and on ours, their results required equal."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService

from dsh_session_adk import DshSessionService

__all__ = ["Scenario", "same_on_both"]

#: A scenario: what it does with a session service, and what it returns to compare.
Scenario = Callable[[BaseSessionService], Awaitable[Any]]


def same_on_both(url: str, scenario: Scenario) -> Any:
    """Run ``scenario`` on ADK's in-memory service and on ours (on the store ``url``);
    they must return the same, which is returned."""

    async def both() -> tuple[Any, Any]:
        expected = await scenario(InMemorySessionService())
        async with DshSessionService(url) as ours:
            got = await scenario(ours)
        return expected, got

    expected, got = asyncio.run(both())
    assert got == expected
    return got
