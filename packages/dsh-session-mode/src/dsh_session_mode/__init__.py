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

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (and so
# every store and CLI command) does not pay for what it does not use.
if _typing.TYPE_CHECKING:
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
    from .errors import ModeConfigError, UnknownModeError
    from .events import ModeSet, ModeSetData

_LAZY: dict[str, str] = {
    "APPROVE_LABEL": "._exit_plan",
    "DEFAULT_MODE": "._config",
    "EXIT_PLAN_MODE": "._config",
    "ExitPlanCallCard": "._exit_plan",
    "ExitPlanResultCard": "._exit_plan",
    "KEEP_PLANNING_LABEL": "._exit_plan",
    "ModeConfig": "._config",
    "ModeConfigError": ".errors",
    "ModeDefinition": "._config",
    "ModeSet": ".events",
    "ModeSetData": ".events",
    "ModeState": "._service",
    "Modes": "._service",
    "PLAN_MODE": "._config",
    "PLAN_REVIEW_QUESTION": "._exit_plan",
    "PLAN_SECTION": "._config",
    "PLAN_TOOLS": "._config",
    "Question": "._exit_plan",
    "QuestionAnswer": "._exit_plan",
    "QuestionOption": "._exit_plan",
    "ToolOutcome": "._exit_plan",
    "UnknownModeError": ".errors",
    "exit_plan_mode": "._exit_plan",
    "fold_mode": "._fold",
    "mode_at_last_header": "._fold",
    "plan_title": "._exit_plan",
    "present_exit_plan_call": "._exit_plan",
    "present_exit_plan_result": "._exit_plan",
    "resolve_config": "._config",
}

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


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-mode")
