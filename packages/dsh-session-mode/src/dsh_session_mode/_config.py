"""Mode definitions and their validation (``resolveConfig`` in the reference).

A deployment configures modes as plain data, e.g. read from TOML or JSON::

    {"modes": {"review": {"section": "You are reviewing...", "tools": ["read"]}}}

:func:`resolve_config` checks that shape with the reference's exact messages and merges
in the built-in ``plan`` definition, which always comes first (a configured ``plan``
replaces its content but keeps its place).
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_MODE",
    "EXIT_PLAN_MODE",
    "PLAN_MODE",
    "PLAN_SECTION",
    "PLAN_TOOLS",
    "ModeConfig",
    "ModeDefinition",
    "resolve_config",
]

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from .errors import ModeConfigError

#: The mode a log with no ``mode/set`` folds to: the absence of policy. Reserved: it can
#: never be defined, and is always a valid target of ``Modes.set``.
DEFAULT_MODE: Final = "default"

#: The one built-in mode definition's name.
PLAN_MODE: Final = "plan"

#: The plan-review tool's name; it is offered only while the session is in plan mode.
EXIT_PLAN_MODE: Final = "exit_plan_mode"

#: The guidance the model sees while in plan mode (the ``mode:policy`` prompt section).
PLAN_SECTION: Final = (
    "You are in plan mode: a read-only planning state. Explore, analyze, and design; "
    "do not attempt to modify anything — mutating tools are not available and calls to "
    "them are denied. When your plan is ready, present it with the exit_plan_mode tool "
    "and wait for the user's review. If exit_plan_mode is unavailable or its review "
    "fails, ask the user to switch the session out of plan mode instead of retrying "
    "denied tools."
)

#: The tools plan mode allows (visible and executable); everything else is denied.
PLAN_TOOLS: Final = ("read", "todo_write", "web_search", "web_fetch", EXIT_PLAN_MODE)


@dataclasses.dataclass(frozen=True, slots=True)
class ModeDefinition:
    """One mode's policy.

    :param name: the mode name (never ``default``).
    :param section: the guidance text rendered as the ``mode:policy`` prompt section.
    :param tools: the allowlist of tool names; it may name tools no registry has (yet).
    """

    name: str
    section: str
    tools: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ModeConfig:
    """Validated mode definitions, ``plan`` first. Build it with :func:`resolve_config`.

    :param definitions: definitions by name, in order; never holds ``default``.
    """

    definitions: Mapping[str, ModeDefinition]

    @property
    def names(self) -> tuple[str, ...]:
        """The defined mode names, in order (``default`` is not one of them)."""
        return tuple(self.definitions)


_BUILT_IN = ModeDefinition(name=PLAN_MODE, section=PLAN_SECTION, tools=PLAN_TOOLS)


def resolve_config(config: Mapping[str, Any] | None = None) -> ModeConfig:
    """Validate a raw mode configuration and merge the built-in ``plan`` definition.

    :param config: ``{"modes": {name: {"section": str, "tools": [str, ...]}}}``; ``None``
        or a config without ``modes`` gives the built-in ``plan`` alone. Keys other than
        ``section`` and ``tools`` in a definition are ignored, as in the reference.
    :returns: the definitions, ``plan`` first, then the configured ones in their order.
    :raises ModeConfigError: ``ModeConfig: "default" is reserved (the absence of policy)
        and cannot be defined``; ``ModeConfig: mode "<name>" needs a string `section```;
        ``ModeConfig: mode "<name>" needs a `tools` array of tool names``; or the config
        is not a mapping of names to definitions at all.
    """
    definitions: dict[str, ModeDefinition] = {PLAN_MODE: _BUILT_IN}
    raw: object = {} if config is None else config  # untyped callers pass anything
    if not isinstance(raw, Mapping):
        msg = f"ModeConfig: the config must be a mapping with a `modes` key, got {raw!r}"
        raise ModeConfigError(msg)
    modes = raw.get("modes")
    if modes is None:
        modes = {}
    if not isinstance(modes, Mapping):
        msg = f"ModeConfig: `modes` must map mode names to definitions, got {modes!r}"
        raise ModeConfigError(msg)
    for name, definition in modes.items():
        if not isinstance(name, str):
            msg = f"ModeConfig: mode names must be strings, got {name!r}"
            raise ModeConfigError(msg)
        if name == DEFAULT_MODE:
            msg = (
                f'ModeConfig: "{DEFAULT_MODE}" is reserved (the absence of policy) and '
                f"cannot be defined"
            )
            raise ModeConfigError(msg, mode=name)
        # A definition that is not a mapping has no string `section` either: the
        # reference reads `definition.section` and reports exactly that.
        fields: Mapping[str, Any] = definition if isinstance(definition, Mapping) else {}
        section = fields.get("section")
        if not isinstance(section, str):
            msg = f'ModeConfig: mode "{name}" needs a string `section`'
            raise ModeConfigError(msg, mode=name)
        tools = fields.get("tools")
        # A JS array: a list or tuple, never a string (which is a sequence of strings).
        if not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools):
            msg = f'ModeConfig: mode "{name}" needs a `tools` array of tool names'
            raise ModeConfigError(msg, mode=name)
        # Assigning an existing key keeps its position: an overridden `plan` stays first.
        definitions[name] = ModeDefinition(name=name, section=section, tools=tuple(tools))
    return ModeConfig(definitions=MappingProxyType(definitions))
