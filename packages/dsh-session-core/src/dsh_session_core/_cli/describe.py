"""One-line descriptions of events from their wire shape, for people: the read model's
(:mod:`.._inspect.describe`), named here for the commands that print them."""

from __future__ import annotations

from .._inspect.describe import (
    LABELS,
    USAGE_KEYS,
    blocks_text,
    compact_head,
    describe,
    field,
    hook_outcome,
    obj,
    reason_text,
    trigger_text,
    usage_sum,
    usage_text,
    when,
    wire_events,
    wire_of,
)

__all__ = [
    "LABELS",
    "USAGE_KEYS",
    "blocks_text",
    "compact_head",
    "describe",
    "field",
    "hook_outcome",
    "obj",
    "reason_text",
    "trigger_text",
    "usage_sum",
    "usage_text",
    "when",
    "wire_events",
    "wire_of",
]
