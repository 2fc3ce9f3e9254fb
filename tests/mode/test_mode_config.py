"""Spec §5.2: mode configuration and its validation (``resolveConfig``)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dsh_session_mode import (
    PLAN_SECTION,
    PLAN_TOOLS,
    ModeConfig,
    ModeConfigError,
    ModeDefinition,
    Modes,
    resolve_config,
)

SECTION = (
    "You are in plan mode: a read-only planning state. Explore, analyze, and design; do not "
    "attempt to modify anything — mutating tools are not available and calls to them are "
    "denied. When your plan is ready, present it with the exit_plan_mode tool and wait for "
    "the user's review. If exit_plan_mode is unavailable or its review fails, ask the user "
    "to switch the session out of plan mode instead of retrying denied tools."
)


def test_the_built_in_plan_definition() -> None:
    configs: list[dict[str, Any] | None] = [None, {}, {"modes": None}, {"modes": {}}]
    for config in configs:
        resolved = resolve_config(config)
        assert resolved.names == ("plan",)
        plan = resolved.definitions["plan"]
        assert plan == ModeDefinition(
            name="plan",
            section=SECTION,
            tools=("read", "todo_write", "web_search", "web_fetch", "exit_plan_mode"),
        )
    assert PLAN_SECTION == SECTION
    assert PLAN_TOOLS == ("read", "todo_write", "web_search", "web_fetch", "exit_plan_mode")


def test_configured_modes_override_and_extend_plan_which_stays_first() -> None:
    resolved = resolve_config({"modes": {
        "review": {"section": "review", "tools": ["read", "write"]},
        "plan": {"section": "custom plan", "tools": ("read",)},
    }})
    assert resolved.names == ("plan", "review")
    assert resolved.definitions["plan"] == ModeDefinition("plan", "custom plan", ("read",))
    assert resolved.definitions["review"] == ModeDefinition("review", "review",
                                                            ("read", "write"))
    assert Modes(resolved).list() == ["default", "plan", "review"]


def test_allowlists_may_name_unregistered_tools_and_may_be_empty() -> None:
    resolved = resolve_config({"modes": {"x": {"section": "", "tools": []},
                                         "y": {"section": "s", "tools": ["no_such_tool"]}}})
    assert resolved.definitions["x"].tools == ()
    assert resolved.definitions["y"].tools == ("no_such_tool",)


def test_extra_definition_keys_are_ignored_as_in_the_reference() -> None:
    resolved = resolve_config({"modes": {"x": {"section": "s", "tools": [], "note": 1}}})
    assert resolved.definitions["x"] == ModeDefinition("x", "s", ())


def test_the_resolved_config_cannot_be_changed() -> None:
    resolved = resolve_config({"modes": {"x": {"section": "s", "tools": ["a"]}}})
    with pytest.raises(TypeError):
        resolved.definitions["y"] = resolved.definitions["x"]  # type: ignore[index]
    assert isinstance(resolved, ModeConfig)


def _raises(config: Any, message: str) -> ModeConfigError:
    with pytest.raises(ModeConfigError, match=f"^{re.escape(message)}$") as info:
        resolve_config(config)
    assert isinstance(info.value, ValueError)
    return info.value


def test_default_is_reserved() -> None:
    err = _raises({"modes": {"default": {"section": "", "tools": []}}},
                  'ModeConfig: "default" is reserved (the absence of policy) and cannot be '
                  "defined")
    assert err.mode == "default"


@pytest.mark.parametrize("definition", [
    {"section": 5, "tools": []},
    {"tools": []},
    {"section": None, "tools": []},
    "not a definition",
    None,
])
def test_a_section_must_be_a_string(definition: Any) -> None:
    err = _raises({"modes": {"bad": definition}}, 'ModeConfig: mode "bad" needs a string `section`')
    assert err.mode == "bad"


@pytest.mark.parametrize("tools", ["read", [7], ["read", None], None, {"read": True}])
def test_tools_must_be_an_array_of_names(tools: Any) -> None:
    _raises({"modes": {"bad": {"section": "", "tools": tools}}},
            'ModeConfig: mode "bad" needs a `tools` array of tool names')


def test_the_first_bad_definition_is_reported() -> None:
    _raises({"modes": {"ok": {"section": "", "tools": []}, "b1": {"section": 1, "tools": []},
                       "b2": {"section": "", "tools": 1}}},
            'ModeConfig: mode "b1" needs a string `section`')


@pytest.mark.parametrize("config", [["plan"], {"modes": ["plan"]}, {"modes": {1: {}}}])
def test_a_config_of_the_wrong_shape_is_refused(config: Any) -> None:
    with pytest.raises(ModeConfigError, match=r"^ModeConfig: "):
        resolve_config(config)


def test_modes_resolves_a_raw_config_itself() -> None:
    with pytest.raises(ModeConfigError, match='"default" is reserved'):
        Modes({"modes": {"default": {"section": "", "tools": []}}})
    assert Modes().config.names == ("plan",)
