"""Token estimation (spec §3.2): a character-count heuristic, as the reference computes it.

Lengths are JS string lengths, in UTF-16 code units (an emoji counts 2, where Python's
``len`` counts 1), divided by ``chars_per_token`` and rounded up. Each block and each
message adds a fixed overhead of 4. The estimates decide when to compact, what to
keep, and whether a summary shrinks the history, so they must match the reference to
the token.

Subclass :class:`TokenEstimator` to plug in a real tokenizer: the compactor only calls
its public methods.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from dsh_session_core import SURFACE_TYPES, Event
from dsh_session_core.jscompat import utf16_len

from ._blocks import content_of, field, js_json, kind_of, seq_of_blocks, text_field

__all__ = ["BLOCK_OVERHEAD", "MESSAGE_OVERHEAD", "TokenEstimator"]

#: Added per content block (and per tool-result wrapper).
BLOCK_OVERHEAD = 4
#: Added per message by :meth:`TokenEstimator.estimate_tokens`.
MESSAGE_OVERHEAD = 4


class TokenEstimator:
    """Estimates tokens from character counts.

    :param chars_per_token: characters per token; may be fractional. Validated by
        :class:`~dsh_session_compact.BasicCompactConfig`, not here.
    """

    __slots__ = ("chars_per_token",)

    def __init__(self, chars_per_token: float = 4) -> None:
        self.chars_per_token = chars_per_token

    def __repr__(self) -> str:
        return f"{type(self).__name__}(chars_per_token={self.chars_per_token!r})"

    def text_tokens(self, text: str) -> int:
        """``ceil(len(text) / chars_per_token)``, with the JS length."""
        return math.ceil(utf16_len(text) / self.chars_per_token)

    def estimate_content_tokens(self, blocks: Iterable[object]) -> int:
        """Estimate a list of content blocks (typed or JSON; 0 for an empty list).

        ``text``/``reasoning``: text tokens + 4; ``tool-call``: name tokens + arguments
        tokens + 4; ``tool-result``: the estimate of its content + 4; any other kind: 4
        + the tokens of the block's compact JSON text.
        """
        total = 0
        for block in blocks:
            kind = kind_of(block)
            if kind in ("text", "reasoning"):
                total += self.text_tokens(text_field(block, "text")) + BLOCK_OVERHEAD
            elif kind == "tool-call":
                total += (
                    self.text_tokens(text_field(block, "name"))
                    + self.text_tokens(text_field(block, "arguments"))
                    + BLOCK_OVERHEAD
                )
            elif kind == "tool-result":
                inner = seq_of_blocks(field(block, "content"))
                total += self.estimate_content_tokens(inner) + BLOCK_OVERHEAD
            else:
                total += BLOCK_OVERHEAD + self.text_tokens(js_json(block))
        return total

    def estimate_event_tokens(self, event: Event) -> int:
        """The content estimate of a surface-type event's ``data.content``; 0 for any
        other type (log-only events cost nothing)."""
        if event.type not in SURFACE_TYPES:
            return 0
        return self.estimate_content_tokens(content_of(event.data))

    def estimate_tokens(self, messages: Iterable[object], system_prompt: str = "") -> int:
        """Estimate a request: each message's content + 4, plus the system prompt's
        tokens when it is not empty.

        :param messages: derived :class:`~dsh_session_core.Message` objects (or their
            JSON form), in request order.
        :param system_prompt: the full system prompt of the request.
        """
        total = sum(
            self.estimate_content_tokens(content_of(message)) + MESSAGE_OVERHEAD
            for message in messages
        )
        if system_prompt:
            total += self.text_tokens(system_prompt)
        return total
