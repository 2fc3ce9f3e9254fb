"""BasicCompactConfig (spec §3.1) beyond scenario 77: every rule, the reference's value
rendering, defaults, and the order the rules are checked in."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from compact_helpers import CONFIG_73
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_compact import BasicCompactConfig, Compactor, resolve_config
from dsh_session_compact.errors import CompactConfigError


def _message(override: dict[str, Any]) -> str:
    with pytest.raises(CompactConfigError) as info:
        resolve_config({**CONFIG_73, **override})
    return str(info.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"contextWindow": -5}, "contextWindow (-5) must be a positive integer."),
        ({"contextWindow": 1.5}, "contextWindow (1.5) must be a positive integer."),
        ({"contextWindow": True}, "contextWindow (true) must be a positive integer."),
        ({"contextWindow": "4000"}, "contextWindow (4000) must be a positive integer."),
        ({"contextWindow": None}, "contextWindow (null) must be a positive integer."),
        ({"thresholdRatio": 0}, "thresholdRatio (0) must be a number in (0, 1]."),
        ({"thresholdRatio": math.inf}, "thresholdRatio (Infinity) must be a number in (0, 1]."),
        ({"thresholdRatio": -1e-7}, "thresholdRatio (-1e-7) must be a number in (0, 1]."),
        ({"retainTokens": -1}, "retainTokens (-1) must be a non-negative integer."),
        ({"summarizationModel": 5}, "summarizationModel must be a string."),
        ({"maxTokens": 0}, "maxTokens (0) must be a positive integer."),
        ({"maxTokens": [1, 2]}, "maxTokens (1,2) must be a positive integer."),
        ({"compactionRetries": 0.5}, "compactionRetries (0.5) must be a non-negative integer."),
        ({"compactionRetries": {}}, "compactionRetries ([object Object]) must be a non-negative "
                                    "integer."),
        ({"auto": 1}, "auto must be a boolean."),
        ({"charsPerToken": 0}, "charsPerToken (0) must be a positive finite number."),
        ({"charsPerToken": -math.inf}, "charsPerToken (-Infinity) must be a positive finite "
                                       "number."),
    ],
)
def test_each_rule_with_the_reference_message(override: dict[str, Any], message: str) -> None:
    assert _message(override) == f"BasicCompactConfig: {message}"


def test_a_missing_required_key_reads_as_undefined() -> None:
    raw = dict(CONFIG_73)
    del raw["maxTokens"]
    with pytest.raises(CompactConfigError, match=re.escape(
        "BasicCompactConfig: maxTokens (undefined) must be a positive integer."
    )):
        resolve_config(raw)
    del raw["summarizationModel"]
    with pytest.raises(CompactConfigError, match="summarizationModel must be a string"):
        resolve_config(raw)


def test_rules_are_checked_in_the_reference_order() -> None:
    bad = {"contextWindow": 0, "thresholdRatio": 2, "auto": "x", "charsPerToken": 0}
    assert "contextWindow" in _message(bad)
    assert "thresholdRatio" in _message({**bad, "contextWindow": 1})
    assert "auto" in _message({**bad, "contextWindow": 1, "thresholdRatio": 1})


def test_defaults_and_normalisation() -> None:
    config = resolve_config({**CONFIG_73, "contextWindow": 4000.0, "unknownKey": 1})
    assert config == BasicCompactConfig(
        context_window=4000, threshold_ratio=0.5, retain_tokens=600, summarization_model="",
        max_tokens=8192, compaction_retries=1, auto=False, chars_per_token=4,
    )
    assert type(config.context_window) is int


def test_auto_and_chars_per_token_default() -> None:
    raw = {k: v for k, v in CONFIG_73.items() if k != "auto"}
    config = resolve_config(raw)
    assert (config.auto, config.chars_per_token) == (True, 4)
    assert Compactor(raw).estimator.chars_per_token == 4
    assert Compactor({**raw, "charsPerToken": 2.5}).estimator.chars_per_token == 2.5


def test_a_large_retain_budget_is_accepted() -> None:
    assert resolve_config({**CONFIG_73, "retainTokens": 10**9}).retain_tokens == 10**9


def test_the_threshold_is_floored() -> None:
    assert resolve_config({**CONFIG_73, "contextWindow": 999, "thresholdRatio": 0.8}).threshold \
        == 799


def test_the_config_is_immutable() -> None:
    config = resolve_config(CONFIG_73)
    with pytest.raises(AttributeError):
        config.max_tokens = 1  # type: ignore[misc]


@given(st.integers(max_value=0))
def test_any_non_positive_window_is_refused(n: int) -> None:
    assert _message({"contextWindow": n}) == (
        f"BasicCompactConfig: contextWindow ({n}) must be a positive integer."
    )


@given(st.floats(min_value=0, max_value=1, exclude_min=True))
def test_any_ratio_in_the_interval_is_accepted(ratio: float) -> None:
    config = resolve_config({**CONFIG_73, "thresholdRatio": ratio})
    assert config.threshold == math.floor(4000 * ratio)
