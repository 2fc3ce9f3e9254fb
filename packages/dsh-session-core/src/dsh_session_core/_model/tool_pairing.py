"""Tool-pairing balance (spec §9): whether a cut in the surface splits a call from its result.

Whether a cut leaves a tool call on one side and its result on the other, so that a
region between two balanced cuts can be collapsed (compacted) safely.

It works on the surface, not on the log's ``step/*`` markers, so it stays right after a
replace has put a high-seq node at the head. It counts calls and results; it never
matches their ids, and it never fixes anything.
"""

from __future__ import annotations

__all__ = ["is_tool_pairing_balanced"]

from collections.abc import Iterable, Mapping, Sequence

from ..errors import ToolPairingError
from ..events import AssistantMessageData, Event
from ..vocabulary import ToolCallBlock


def _node_delta(event: Event) -> int:
    """How a surface node moves the count of unanswered calls: an ``assistant/message``
    opens one per ``tool-call`` block, any ``tool/result`` closes one, all else is 0."""
    t = event.type
    if t == "tool/result":
        return -1
    if t != "assistant/message":
        return 0
    data = event.data
    if isinstance(data, AssistantMessageData):
        return sum(1 for block in data.content if isinstance(block, ToolCallBlock))
    # An opaque message (a block kind no schema knows): its payload is read-only JSON.
    content = data.get("content") if isinstance(data, Mapping) else None
    if not isinstance(content, Sequence) or isinstance(content, str):
        return 0
    return sum(
        1 for block in content if isinstance(block, Mapping) and block.get("type") == "tool-call"
    )


def is_tool_pairing_balanced(
    nodes: Iterable[int], events: Sequence[Event], before_seq: int | None
) -> bool:
    """Whether no tool call is left unanswered across a cut in the surface.

    The cut sits immediately before the node ``before_seq``; ``None``, or a seq that is
    not on the surface, names the cut after the tail. A region ``[start..end]`` can be
    collapsed iff the cut before ``start`` and the cut after ``end`` are both balanced.

    :param nodes: the surface node seqs, head to tail.
    :param events: the log, indexed by seq.
    :param before_seq: the node the cut sits before, or ``None`` for after the tail.
    :returns: whether the calls and results before the cut balance.
    :raises ToolPairingError: a ``tool/result`` before the cut has no call to answer. A
        corrupt node sitting exactly at the cut does not raise: the cut is checked before
        the node is counted.
    """
    depth = 0
    for seq in nodes:
        if seq == before_seq:
            return depth == 0
        depth += _node_delta(events[seq])
        if depth < 0:
            msg = (
                f"tool-pairing balance: tool/result at surface seq {seq} has no matching "
                "tool-call (corrupt surface)"
            )
            raise ToolPairingError(msg, seq=seq)
    return depth == 0
