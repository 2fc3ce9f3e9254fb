"""The recorded provider responses in recordings/, served to a real SDK client over
httpx's own mock transport (no network), and read back as the payloads they hold; and
the one-step turn each recorder test records them into."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

from dsh_session_core import Session, SessionStore, Step, create_plugin_manager
from dsh_session_core.providers import RecordedResponse

__all__ = [
    "PROMPT",
    "RECORDINGS",
    "checked_session",
    "one_recorded_step",
    "recorded_json",
    "sse_payloads",
    "transport",
]

RECORDINGS = Path(__file__).parent / "recordings"
#: The user's prompt of every recorded exchange.
PROMPT = "What's the weather in Paris?"


def transport(name: str, seen: list[httpx2.Request]) -> httpx2.MockTransport:
    """Serves recordings/``name`` to any request (an SSE stream for ``.sse``), appending
    each request to ``seen``."""
    body = (RECORDINGS / name).read_bytes()
    kind = "text/event-stream" if name.endswith(".sse") else "application/json"

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, content=body, headers={"content-type": kind})

    return httpx2.MockTransport(handler)


def sse_payloads(name: str) -> list[dict[str, Any]]:
    """The JSON payloads of a recorded stream, as the server sent them (OpenAI's closing
    ``[DONE]`` left out)."""
    return [json.loads(line[6:]) for line in (RECORDINGS / name).read_text().splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def recorded_json(name: str) -> Any:
    """A recorded whole (non-streamed) response body."""
    return json.loads((RECORDINGS / name).read_text())


def checked_session() -> Session:
    """A session of a store that refuses an event breaking turn enclosure or tool
    pairing (strict payloads, as by default)."""
    return SessionStore(create_plugin_manager(autoload=False), checks=True).create("rec")


def one_recorded_step(session: Session, call: Callable[[Step], RecordedResponse],
                      answer: Callable[[Any], str]) -> RecordedResponse:
    """One turn of one step: the prompt, what ``call`` records into the step, then each
    tool call it logged answered with ``answer(ref)``."""
    with session.turn() as turn:
        turn.user(PROMPT)
        with turn.step() as step:
            result = call(step)
            for ref in result.tool_calls:
                step.tool_result(ref, answer(ref))
    return result
