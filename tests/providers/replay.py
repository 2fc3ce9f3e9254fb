"""The recorded provider responses in recordings/, served to a real SDK client over
httpx's own mock transport (no network), and read back as the payloads they hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

__all__ = ["RECORDINGS", "recorded_json", "sse_payloads", "transport"]

RECORDINGS = Path(__file__).parent / "recordings"


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
