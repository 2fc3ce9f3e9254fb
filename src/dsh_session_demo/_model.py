"""The fake model's side of a request: the clock, the header a request records, the
token usage it reports, and the stream chunks it sends.

A real loop gets usage and chunks from the provider; here they are computed from the
log and the scripted reply, so they are plausible and the same on every run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsh_session_compact import TokenEstimator
from dsh_session_core import (
    Event,
    Message,
    Session,
    apply_header_delta,
    canonical_header,
    diff_header,
    header_equals,
)

__all__ = ["Clock", "HeaderWriter", "Usage", "stream_chunks"]


class Clock:
    """An epoch-milliseconds clock that advances by ``tick`` on every reading, so each
    event gets a distinct, reproducible time.

    :param start: the first reading.
    :param tick: milliseconds between two readings.
    """

    __slots__ = ("now", "tick")

    def __init__(self, start: int, tick: int = 25) -> None:
        self.now = start - tick
        self.tick = tick

    def __call__(self) -> int:
        self.now += self.tick
        return self.now

    def wait(self, ms: int) -> None:
        """Let ``ms`` milliseconds pass (a tool running, a user thinking)."""
        self.now += ms


def _pieces(text: str, width: int) -> list[str]:
    """``text`` cut into stream deltas of about ``width`` characters, at spaces."""
    out: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if current and len(candidate) > width:
            out.append(current + " ")
            current = word
        else:
            current = candidate
    out.append(current)
    return [p for p in out if p]


class HeaderWriter:
    """Records the header of each request, as the reference loop does: a snapshot first
    (``initial``, or ``resume`` when the log already has one), then a delta only when
    the header changed, or a ``fallback`` snapshot when a delta cannot round-trip."""

    __slots__ = ("logged",)

    def __init__(self) -> None:
        self.logged = False

    def record(self, session: Session, header: Mapping[str, Any]) -> Event | None:
        canonical = canonical_header(header)
        baseline = session.request_header()
        if not self.logged or baseline is None:
            self.logged = True
            reason = "initial" if baseline is None else "resume"
            return session.append("request/header", {"header": canonical, "reason": reason})
        if header_equals(baseline, canonical):
            return None
        delta = diff_header(baseline, canonical)
        if delta is not None and header_equals(apply_header_delta(baseline, delta), canonical):
            return session.append("request/header-delta", delta)
        return session.append("request/header", {"header": canonical, "reason": "fallback"})


class Usage:
    """Token accounting for the fake model: the prompt is estimated from the derived
    messages (4 characters a token), and a prompt that extends the previous one reads
    the previous one from a prompt cache, as a real provider would."""

    __slots__ = ("estimator", "previous", "previous_tokens")

    def __init__(self) -> None:
        self.estimator = TokenEstimator()
        self.previous: list[Message] = []
        self.previous_tokens = 0

    def count(
        self, messages: list[Message], header: Mapping[str, Any], content: list[Any]
    ) -> dict[str, int]:
        tools = self.estimator.text_tokens(json.dumps(header["tools"]))
        prompt = self.estimator.estimate_tokens(messages, header["system"]) + tools
        cached = 0
        if self.previous and messages[: len(self.previous)] == self.previous:
            cached = min(prompt, self.previous_tokens) // 64 * 64
        self.previous, self.previous_tokens = messages, prompt
        usage = {"inputTokens": prompt - cached,
                 "outputTokens": self.estimator.estimate_content_tokens(content)}
        if cached:
            usage["cacheReadTokens"] = cached
        reasoning = [b for b in content if b["type"] == "reasoning"]
        if reasoning:
            usage["reasoningTokens"] = self.estimator.estimate_content_tokens(reasoning)
        return usage


def stream_chunks(
    content: list[dict[str, Any]], usage: Mapping[str, int], finish: str
) -> list[dict[str, Any]]:
    """The chunks a provider streams for ``content``: per block a ``block-start``, the
    deltas and a ``block-end`` holding the whole block, then ``usage`` and ``finish``."""
    chunks: list[dict[str, Any]] = []
    for index, block in enumerate(content):
        chunks.append({"type": "block-start", "index": index, "blockType": block["type"]})
        if block["type"] == "tool-call":
            args = block["arguments"]
            for i in range(0, len(args), 24):
                delta: dict[str, Any] = {"type": "tool-call-delta", "index": index,
                                         "id": block["id"]}
                if i == 0:
                    delta["name"] = block["name"]  # the name comes with the first delta
                delta["argumentsDelta"] = args[i:i + 24]
                chunks.append(delta)
        else:
            kind = f"{block['type']}-delta"
            chunks.extend({"type": kind, "index": index, "text": piece}
                          for piece in _pieces(block["text"], 32))
        chunks.append({"type": "block-end", "index": index, "block": block})
    chunks.append({"type": "usage", "usage": dict(usage)})
    chunks.append({"type": "finish", "reason": {"kind": finish}})
    return chunks
