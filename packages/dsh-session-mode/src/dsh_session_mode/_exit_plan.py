"""``exit_plan_mode``: the model presents its plan, the user approves it or keeps planning.

There is no tool registry here, so the tool is a function a harness calls with the
model's ``plan`` argument and a way to reach the user. Its result is a
:class:`ToolOutcome`: the text and error flag of the ``tool/result`` to log, rendered as
the reference's registry renders a tool's return value or exception.
"""

from __future__ import annotations

__all__ = [
    "APPROVE_LABEL",
    "KEEP_PLANNING_LABEL",
    "PLAN_REVIEW_QUESTION",
    "ExitPlanCallCard",
    "ExitPlanResultCard",
    "Question",
    "QuestionAnswer",
    "QuestionOption",
    "ToolOutcome",
    "exit_plan_mode",
    "plan_title",
    "present_exit_plan_call",
    "present_exit_plan_result",
]

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Final, Literal, TypedDict

from dsh_session_core import Session, ToolOutcome

from ._config import DEFAULT_MODE, EXIT_PLAN_MODE, PLAN_MODE
from ._service import Modes

#: The review question's approving option; approval is exactly this option selected.
APPROVE_LABEL: Final = "Approve"

#: The review question's other option.
KEEP_PLANNING_LABEL: Final = "Keep planning"




@dataclasses.dataclass(frozen=True, slots=True)
class QuestionOption:
    """One choice offered to the user."""

    label: str
    description: str


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """A single-select question for the user (free text is also accepted).

    :param id: matches the :class:`QuestionAnswer` that answers it.
    :param header: a short title.
    :param question: the question itself.
    :param options: the choices, in order.
    """

    id: str
    header: str
    question: str
    options: tuple[QuestionOption, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class QuestionAnswer:
    """The user's answer to one :class:`Question`.

    :param id: the question's id.
    :param selected: the labels of the options chosen (possibly none).
    :param custom: free text the user wrote, if any.
    """

    id: str
    selected: tuple[str, ...] = ()
    custom: str | None = None


#: The one question ``exit_plan_mode`` asks.
PLAN_REVIEW_QUESTION: Final = Question(
    id="plan-review",
    header="Plan review",
    question="Approve this plan and leave plan mode?",
    options=(
        QuestionOption(
            label=APPROVE_LABEL,
            description="Leave plan mode; the full toolset returns on the next step.",
        ),
        QuestionOption(
            label=KEEP_PLANNING_LABEL,
            description="Stay in plan mode; feedback goes back to the model.",
        ),
    ),
)

#: Asks the user a question and returns their answers (e.g. a UI prompt).
Ask = Callable[[Question], Iterable[QuestionAnswer]]


def exit_plan_mode(
    modes: Modes,
    session: Session | None,
    plan: str,
    answer: Iterable[QuestionAnswer] | Ask | None,
) -> ToolOutcome:
    """Run the ``exit_plan_mode`` tool: have the user review the plan; on approval, leave
    plan mode at once (an in-turn ``mode/set`` to ``default``).

    Checked in this order, each failing as an error result: a session to switch; the
    session is in plan mode (its *logged* mode); a way to ask the user. Approval is
    exactly :data:`APPROVE_LABEL` among the ``selected`` labels of the answer whose id
    is ``plan-review``; free text alone is feedback, never consent.

    :param modes: the deployment's mode service (its config says what plan mode is).
    :param session: the calling agent's session, or ``None`` for an agent-less call.
    :param plan: the model's ``plan`` argument, markdown; it is the durable artifact
        (the logged ``tool/call``), so it is not used here beyond its type.
    :param answer: how to reach the user: a callable asked :data:`PLAN_REVIEW_QUESTION`
        once, and only when the checks above pass (what it raises becomes the error
        text); or the answers already collected (then ask only while
        ``modes.get(session).current == "plan"``); or ``None`` when no user-interaction
        channel exists.
    :returns: ``Plan approved — plan mode exited; ...`` (plus `` User note: <text>`` when
        the user wrote one), or an error result.
    :raises TypeError: ``plan`` is not a string (a tool registry would refuse the call
        before it runs).
    """
    value: object = plan  # model arguments reach here untyped
    if not isinstance(value, str):
        msg = f"{EXIT_PLAN_MODE}: `plan` must be a string, got {type(value).__name__}"
        raise TypeError(msg)
    if session is None:
        return ToolOutcome.error(
            f"{EXIT_PLAN_MODE} requires a calling agent (no session to switch)"
        )
    active = modes.active_definition(session)
    if active is None or active.name != PLAN_MODE:
        return ToolOutcome.error(f"{EXIT_PLAN_MODE} is only available in plan mode")
    if answer is None:
        return ToolOutcome.error(
            "no user-interaction channel is available to review the plan; ask the user to "
            "switch the session mode instead"
        )
    try:
        answers = tuple(answer(PLAN_REVIEW_QUESTION) if callable(answer) else answer)
    except Exception as exc:  # the provider's failure is the model-facing result
        return ToolOutcome.error(str(exc))
    item = next((a for a in answers if a.id == PLAN_REVIEW_QUESTION.id), None)
    if item is None or APPROVE_LABEL not in item.selected:
        feedback = item.custom if item is not None and item.custom is not None else ""
        if feedback == "":
            return ToolOutcome.error(
                "The user chose to keep planning; revise the plan and present it again."
            )
        return ToolOutcome.error(f"The user chose to keep planning; their feedback: {feedback}")
    # In-turn, not at a boundary: the tool runs inside the turn, so the switch is
    # logged now and the next step is assembled in the default mode.
    session.append("mode/set", {"mode": DEFAULT_MODE})
    note = f" User note: {item.custom}" if item.custom else ""
    return ToolOutcome(
        f"Plan approved — plan mode exited; the full toolset returns on your next step.{note}"
    )


# --- presentation (UI cards) -----------------------------------------------------------

# JavaScript's `\s` (WhiteSpace and LineTerminator), which differs from Python's: it has
# U+FEFF and lacks U+001C-U+001F and U+0085. Its `.` stops at any line terminator.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_HEADING = re.compile(rf"#{{1,6}}[{_JS_SPACE}]+([^\n\r\u2028\u2029]+?)[{_JS_SPACE}]*")


def plan_title(plan: str) -> str:
    """The plan's first markdown heading (levels 1-6, trimmed), else ``"Plan"``."""
    for line in plan.split("\n"):
        match = _HEADING.fullmatch(line)
        if match is not None:
            return match.group(1)
    return "Plan"


class _TextContent(TypedDict):
    type: Literal["text"]
    text: str


class ExitPlanCallCard(TypedDict):
    """How a UI shows an ``exit_plan_mode`` call: a generic card titled by the plan."""

    card: Literal["generic"]
    title: str
    kind: Literal["other"]
    content: list[_TextContent]


class ExitPlanResultCard(TypedDict):
    """How a UI shows an ``exit_plan_mode`` result."""

    card: Literal["generic"]
    title: Literal["Plan review"]
    content: list[_TextContent]


def present_exit_plan_call(plan: str) -> ExitPlanCallCard:
    """The call card (``presentCall``): titled by :func:`plan_title`, showing the plan."""
    return {
        "card": "generic",
        "title": plan_title(plan),
        "kind": "other",
        "content": [{"type": "text", "text": plan}],
    }


def present_exit_plan_result(outcome: ToolOutcome) -> ExitPlanResultCard:
    """The result card (``presentResult``): ``Plan review`` with the result text."""
    return {
        "card": "generic",
        "title": "Plan review",
        "content": [{"type": "text", "text": outcome.text}],
    }
