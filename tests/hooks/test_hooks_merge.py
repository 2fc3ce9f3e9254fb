"""The merge beyond scenario 83: the most restrictive decision wins whatever the order,
only objections are surfaced as reasons, the first halt is sticky, and context and
system messages keep hook order."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsh_session_hooks import HookOutput, MergedHookOutput, merge_hook_outputs

_OUTPUTS = st.lists(
    st.builds(
        HookOutput,
        decision=st.sampled_from([None, "approve", "allow", "block", "deny", "ask"]),
        reason=st.one_of(st.none(), st.just(""), st.text(min_size=1, max_size=4)),
        continue_=st.sampled_from([None, True, False]),
        stop_reason=st.one_of(st.none(), st.text(max_size=4)),
        additional_context=st.one_of(st.none(), st.text(max_size=4)),
        system_message=st.one_of(st.none(), st.text(max_size=4)),
    ),
    max_size=6,
)


def _strictest(outputs: list[HookOutput]) -> str:
    """The spec's precedence, stated directly: deny > ask > allow > none."""
    decisions = {o.decision for o in outputs}
    if decisions & {"deny", "block"}:
        return "deny"
    if "ask" in decisions:
        return "ask"
    if decisions & {"allow", "approve"}:
        return "allow"
    return "none"


@given(outputs=_OUTPUTS, data=st.data())
def test_decision_and_stop_do_not_depend_on_hook_order(
    outputs: list[HookOutput], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(outputs))
    a, b = merge_hook_outputs(outputs), merge_hook_outputs(shuffled)
    assert a.decision == b.decision == _strictest(outputs)
    assert a.stop == b.stop == any(o.continue_ is False for o in outputs)
    # The same objections are surfaced (each in hook order: see the next test).
    assert (a.reason is None) == (b.reason is None)
    assert sorted(a.reason or "") == sorted(b.reason or "")


@given(outputs=_OUTPUTS)
def test_reasons_are_the_winning_objections_in_order(outputs: list[HookOutput]) -> None:
    merged = merge_hook_outputs(outputs)
    winners = {"deny": {"deny", "block"}, "ask": {"ask"}}.get(merged.decision, set())
    expected = [o.reason for o in outputs if o.decision in winners and o.reason]
    assert merged.reason == ("\n\n".join(expected) if expected else None)


@given(outputs=_OUTPUTS)
def test_first_halt_is_sticky_and_messages_keep_order(outputs: list[HookOutput]) -> None:
    merged = merge_hook_outputs(outputs)
    halting = [o for o in outputs if o.continue_ is False]
    assert merged.stop_reason == (halting[0].stop_reason if halting else None)
    assert merged.additional_context == tuple(
        o.additional_context for o in outputs if o.additional_context
    )
    assert merged.system_messages == tuple(o.system_message for o in outputs if o.system_message)


def test_allow_reasons_are_never_surfaced() -> None:
    merged = merge_hook_outputs([HookOutput(decision="allow", reason="fine by me")])
    assert (merged.decision, merged.reason) == ("allow", None)
    merged = merge_hook_outputs([HookOutput(decision="approve", reason="ok")])
    assert (merged.decision, merged.reason) == ("allow", None)


def test_ask_reasons_lose_to_a_deny_without_one() -> None:
    merged = merge_hook_outputs(
        [HookOutput(decision="ask", reason="sure?"), HookOutput(decision="block")]
    )
    assert (merged.decision, merged.reason) == ("deny", None)


def test_a_first_halt_without_a_reason_keeps_none() -> None:
    merged = merge_hook_outputs(
        [HookOutput(continue_=False), HookOutput(continue_=False, stop_reason="late")]
    )
    assert (merged.stop, merged.stop_reason) == (True, None)


def test_empty_strings_are_dropped_and_any_iterable_is_accepted() -> None:
    def outputs() -> Any:
        yield HookOutput(additional_context="", system_message="")
        yield HookOutput(additional_context="one", system_message="warn")
        yield HookOutput(decision="deny", reason="")

    assert merge_hook_outputs(outputs()) == MergedHookOutput(
        decision="deny", additional_context=("one",), system_messages=("warn",)
    )
