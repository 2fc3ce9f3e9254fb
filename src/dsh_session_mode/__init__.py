"""dsh-session plugin ``mode``: session modes: the mode/set event, its fold, mode
configuration and validation, the mode service and plan mode's exit tool.

A mode is a named policy (a prompt section and a tool allowlist) folded from the log: the
last ``mode/set`` wins, so resume and fork restore it. ``plan`` is built in::

    from dsh_session_mode import Modes, exit_plan_mode, fold_mode

    modes = Modes({"modes": {"review": {"section": "Review only.", "tools": ["read"]}}})
    store.plugin_manager.register(modes)   # flush pending switches at turn boundaries
    modes.set(session, "plan")             # logged at the next turn/start or step/end
    modes.gate(session, "write")           # 'Error: tool "write" is not available ...'
"""

from __future__ import annotations

from ._config import (
    DEFAULT_MODE,
    EXIT_PLAN_MODE,
    PLAN_MODE,
    PLAN_SECTION,
    PLAN_TOOLS,
    ModeConfig,
    ModeDefinition,
    resolve_config,
)
from ._errors import ModeConfigError, UnknownModeError
from ._exit_plan import (
    APPROVE_LABEL,
    KEEP_PLANNING_LABEL,
    PLAN_REVIEW_QUESTION,
    ExitPlanCallCard,
    ExitPlanResultCard,
    Question,
    QuestionAnswer,
    QuestionOption,
    ToolOutcome,
    exit_plan_mode,
    plan_title,
    present_exit_plan_call,
    present_exit_plan_result,
)
from ._fold import fold_mode, mode_at_last_header
from ._service import Modes, ModeState
from .events import ModeSet, ModeSetData

__all__ = [
    "APPROVE_LABEL",
    "DEFAULT_MODE",
    "EXIT_PLAN_MODE",
    "KEEP_PLANNING_LABEL",
    "PLAN_MODE",
    "PLAN_REVIEW_QUESTION",
    "PLAN_SECTION",
    "PLAN_TOOLS",
    "ExitPlanCallCard",
    "ExitPlanResultCard",
    "ModeConfig",
    "ModeConfigError",
    "ModeDefinition",
    "ModeSet",
    "ModeSetData",
    "ModeState",
    "Modes",
    "Question",
    "QuestionAnswer",
    "QuestionOption",
    "ToolOutcome",
    "UnknownModeError",
    "exit_plan_mode",
    "fold_mode",
    "mode_at_last_header",
    "plan_title",
    "present_exit_plan_call",
    "present_exit_plan_result",
    "resolve_config",
]
