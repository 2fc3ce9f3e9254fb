"""Folding the outputs of every hook that matched one hook point into one outcome, the
most restrictive: ``deny`` beats ``ask`` beats ``allow``; the first halt is sticky;
context and system messages accumulate in hook order.
"""

from __future__ import annotations

__all__ = ["MergedDecision", "MergedHookOutput", "merge_hook_outputs"]

from collections.abc import Iterable
from typing import Final, Literal, TypeAlias

from msgspec import Struct

from ._codec import HookOutput

#: The one decision a hook point resolves to: ``block`` folds into ``deny`` and
#: ``approve`` into ``allow``; ``none`` when no hook expressed a decision.
MergedDecision: TypeAlias = Literal["allow", "ask", "deny", "none"]

# Higher is stricter.
_RANK: Final[dict[str | None, int]] = {"deny": 3, "block": 3, "ask": 2, "allow": 1, "approve": 1}
_DECISION_OF_RANK: Final[tuple[MergedDecision, ...]] = ("none", "allow", "ask", "deny")
# Only objections explain a decision: an allow reason is never surfaced.
_RANKS_WITH_REASONS: Final = frozenset({2, 3})


class MergedHookOutput(Struct, frozen=True, kw_only=True):
    """The folded outcome of every hook that matched one point. ``None`` means absent.

    :ivar decision: the most restrictive decision.
    :ivar reason: the non-empty reasons of the outputs at the winning rank (``deny``/
        ``block``, or ``ask``), joined by a blank line; ``None`` when there are none.
    :ivar stop: whether any hook asked to halt (``continue`` literally ``False``).
    :ivar stop_reason: the first halting hook's ``stop_reason``, if it gave one.
    :ivar additional_context: every non-empty ``additional_context``, in hook order.
    :ivar system_messages: every non-empty ``system_message``, in hook order.
    """

    decision: MergedDecision
    reason: str | None = None
    stop: bool = False
    stop_reason: str | None = None
    additional_context: tuple[str, ...] = ()
    system_messages: tuple[str, ...] = ()


def merge_hook_outputs(outputs: Iterable[HookOutput]) -> MergedHookOutput:
    """Fold the outputs of the hooks that matched one point, in hook order.

    No output at all gives the neutral outcome: ``decision="none"``, no stop, empty
    context; the caller reads it as "no hook had anything to say".

    :param outputs: every matched hook's decoded output, in hook order.
    :returns: the merged outcome.
    """
    top = 0
    reasons: dict[int, list[str]] = {}
    stop = False
    stop_reason: str | None = None
    context: list[str] = []
    messages: list[str] = []
    for out in outputs:
        rank = _RANK.get(out.decision, 0)
        top = max(top, rank)
        if rank in _RANKS_WITH_REASONS and out.reason:
            reasons.setdefault(rank, []).append(out.reason)
        if out.continue_ is False and not stop:
            stop = True
            stop_reason = out.stop_reason
        if out.additional_context:
            context.append(out.additional_context)
        if out.system_message:
            messages.append(out.system_message)
    winning = reasons.get(top)
    return MergedHookOutput(
        decision=_DECISION_OF_RANK[top],
        reason="\n\n".join(winning) if winning else None,
        stop=stop,
        stop_reason=stop_reason,
        additional_context=tuple(context),
        system_messages=tuple(messages),
    )
