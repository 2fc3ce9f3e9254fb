"""Spec §5.4 and scenario 87: the ``exit_plan_mode`` tool and its UI cards."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from mode_support import bare, header, set_mode, types, wires

from dsh_session_core import Session
from dsh_session_core.vocabulary import TextBlock
from dsh_session_mode import (
    PLAN_REVIEW_QUESTION,
    Modes,
    Question,
    QuestionAnswer,
    QuestionOption,
    ToolOutcome,
    exit_plan_mode,
    fold_mode,
    plan_title,
    present_exit_plan_call,
    present_exit_plan_result,
)

APPROVED = "Plan approved — plan mode exited; the full toolset returns on your next step."
KEEP = "Error: The user chose to keep planning; revise the plan and present it again."
PLAN = "# The plan\n\ndo things"


def in_plan(config: object = None) -> tuple[Modes, Session]:
    modes, s = bare(config)
    set_mode(s, "plan")
    return modes, s


def review(selected: tuple[str, ...], custom: str | None = None) -> list[QuestionAnswer]:
    return [QuestionAnswer(id="plan-review", selected=selected, custom=custom)]


def test_s87_approve_with_a_note() -> None:
    modes, s = in_plan()
    out = exit_plan_mode(modes, s, PLAN, review(("Approve",), "ship it small"))
    assert out == ToolOutcome(f"{APPROVED} User note: ship it small", is_error=False)
    assert fold_mode(s.events) == "default"
    assert wires(s)[-1]["data"] == {"mode": "default"}  # appended in-turn, now


def test_s87_free_text_alone_is_feedback_not_consent() -> None:
    modes, s = in_plan()
    out = exit_plan_mode(modes, s, PLAN, review((), "add tests first"))
    assert out == ToolOutcome(
        "Error: The user chose to keep planning; their feedback: add tests first",
        is_error=True,
    )
    assert fold_mode(s.events) == "plan"
    assert types(s) == ["mode/set"]


def test_s87_present_call_titles() -> None:
    assert present_exit_plan_call("## Fix the flake\n\nsteps") == {
        "card": "generic",
        "title": "Fix the flake",
        "kind": "other",
        "content": [{"type": "text", "text": "## Fix the flake\n\nsteps"}],
    }
    assert present_exit_plan_call("no heading here")["title"] == "Plan"


def test_approve_without_a_note() -> None:
    for custom in (None, ""):
        modes, s = in_plan()
        out = exit_plan_mode(modes, s, PLAN, review(("Approve",), custom))
        assert out == ToolOutcome(APPROVED)
        assert fold_mode(s.events) == "default"


def test_approval_logs_no_notice_even_after_a_header() -> None:
    # The tool result is the narration; only user switches get a context notice.
    modes, s = in_plan()
    header(s)
    exit_plan_mode(modes, s, PLAN, review(("Approve",)))
    assert types(s) == ["mode/set", "request/header", "mode/set"]
    assert modes.flush(s, turn_start=True) == []


@pytest.mark.parametrize("answers", [
    review(("Keep planning",)),
    review(()),
    review(("Keep planning",), ""),
    [],  # no answer for the plan-review question at all
    [QuestionAnswer(id="other", selected=("Approve",))],
    review(("approve",)),  # an unknown label never exits
])
def test_keep_planning_without_feedback(answers: list[QuestionAnswer]) -> None:
    modes, s = in_plan()
    assert exit_plan_mode(modes, s, PLAN, answers) == ToolOutcome(KEEP, is_error=True)
    assert fold_mode(s.events) == "plan"


def test_keep_planning_with_feedback_verbatim() -> None:
    modes, s = in_plan()
    out = exit_plan_mode(modes, s, PLAN, review(("Keep planning",), "  consider the resume path"))
    assert out.text == (
        "Error: The user chose to keep planning; their feedback:   consider the resume path")


def test_the_checks_and_their_order() -> None:
    modes, s = bare()
    asked: list[Question] = []

    def ask(q: Question) -> Iterable[QuestionAnswer]:
        asked.append(q)
        return review(("Approve",))

    assert exit_plan_mode(modes, None, PLAN, ask) == ToolOutcome(
        "Error: exit_plan_mode requires a calling agent (no session to switch)", is_error=True)
    assert exit_plan_mode(modes, s, PLAN, ask) == ToolOutcome(
        "Error: exit_plan_mode is only available in plan mode", is_error=True)
    set_mode(s, "retired")
    assert exit_plan_mode(modes, s, PLAN, ask).text == (
        "Error: exit_plan_mode is only available in plan mode")
    assert asked == []  # the user is never asked when the call cannot succeed
    set_mode(s, "plan")
    assert exit_plan_mode(modes, s, PLAN, None) == ToolOutcome(
        "Error: no user-interaction channel is available to review the plan; ask the user "
        "to switch the session mode instead", is_error=True)
    assert fold_mode(s.events) == "plan"


def test_only_plan_mode_may_exit_even_when_a_mode_allowlists_the_tool() -> None:
    modes, s = bare({"modes": {"review": {"section": "r", "tools": ["exit_plan_mode"]}}})
    set_mode(s, "review")
    out = exit_plan_mode(modes, s, PLAN, review(("Approve",)))
    assert out.text == "Error: exit_plan_mode is only available in plan mode"


def test_the_user_is_asked_the_review_question_once() -> None:
    modes, s = in_plan()
    asked: list[Question] = []

    def ask(q: Question) -> Iterable[QuestionAnswer]:
        asked.append(q)
        return iter(review(("Approve",)))

    assert exit_plan_mode(modes, s, PLAN, ask).is_error is False
    assert asked == [PLAN_REVIEW_QUESTION]
    assert Question(
        id="plan-review",
        header="Plan review",
        question="Approve this plan and leave plan mode?",
        options=(
            QuestionOption("Approve",
                           "Leave plan mode; the full toolset returns on the next step."),
            QuestionOption("Keep planning",
                           "Stay in plan mode; feedback goes back to the model."),
        ),
    ) == PLAN_REVIEW_QUESTION


def test_a_failing_provider_becomes_the_error_text() -> None:
    modes, s = in_plan()

    def ask(q: Question) -> Iterable[QuestionAnswer]:
        raise RuntimeError("review aborted")

    assert exit_plan_mode(modes, s, PLAN, ask) == ToolOutcome("Error: review aborted", True)
    assert fold_mode(s.events) == "plan"


def test_plan_must_be_a_string() -> None:
    modes, s = in_plan()
    with pytest.raises(TypeError, match="`plan` must be a string"):
        exit_plan_mode(modes, s, None, review(("Approve",)))  # type: ignore[arg-type]


def test_outcome_content() -> None:
    assert ToolOutcome("hi").content == (TextBlock(text="hi"),)
    assert ToolOutcome.error("boom") == ToolOutcome("Error: boom", is_error=True)


def test_present_result() -> None:
    out = ToolOutcome("ok")
    assert present_exit_plan_result(out) == {
        "card": "generic", "title": "Plan review", "content": [{"type": "text", "text": "ok"}]}


@pytest.mark.parametrize(("plan", "title"), [
    ("# Top", "Top"),
    ("intro\n### Third level  \nbody", "Third level"),
    ("###### Six", "Six"),
    ("####### Seven", "Plan"),  # seven hashes is not a heading
    ("#NoSpace", "Plan"),
    ("  # indented", "Plan"),
    # The reference's /^#{1,6}\s+(.+?)\s*$/ on a blank heading captures one space (its
    # `.+?` needs a character): kept, for parity.
    ("#   \n## Real", " "),
    ("# First\n# Second", "First"),
    ("# Windows\r\nbody", "Windows"),
    ("#\u00a0Non-breaking\u3000", "Non-breaking"),  # JavaScript \s includes these
    ("# a\u2028b", "Plan"),  # JavaScript . stops at a line separator
    ("# keep\x1c", "keep\x1c"),  # ... and its \s lacks U+001C, unlike Python's
    ("# bom\ufeff", "bom"),
    ("", "Plan"),
])
def test_plan_title(plan: str, title: str) -> None:
    assert plan_title(plan) == title
