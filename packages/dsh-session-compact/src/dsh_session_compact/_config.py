"""The basic backend's configuration and its validation (spec §3.1).

Validation runs when the config is built, in the reference's key order, and stops at
the first bad value with the reference's message, which names the key as the reference
spells it and renders the value as a JS template string would (``NaN``, ``undefined``,
``1e-7``). Booleans are not numbers here, although Python's ``bool`` is an ``int``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from dsh_session_core.jscompat import UNDEFINED, js_string

from .errors import CompactConfigError

__all__ = ["BasicCompactConfig", "resolve_config"]


#: A key absent from a raw config: JS reads it as ``undefined``.
_MISSING: Final = UNDEFINED


def _number(value: object) -> int | float | None:
    """``value`` when JS would see a number (a ``bool`` is not one), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _finite(n: int | float) -> bool:
    # An int is always finite (and math.isfinite overflows on a huge one).
    return not isinstance(n, float) or math.isfinite(n)


def _integer(value: object) -> int | None:
    """``value`` as an int when JS ``Number.isInteger`` holds (``4000.0`` is 4000: JS has
    one number type), else ``None``."""
    n = _number(value)
    if isinstance(n, float):
        return int(n) if math.isfinite(n) and n.is_integer() else None
    return n


def _fail(key: str, value: object, rule: str) -> CompactConfigError:
    return CompactConfigError(f"BasicCompactConfig: {key} ({js_string(value)}) {rule}", key=key)


def _positive_integer(key: str, value: object) -> int:
    n = _integer(value)
    if n is None or n <= 0:
        raise _fail(key, value, "must be a positive integer.")
    return n


def _non_negative_integer(key: str, value: object) -> int:
    n = _integer(value)
    if n is None or n < 0:
        raise _fail(key, value, "must be a non-negative integer.")
    return n


def _ratio(key: str, value: object) -> float:
    n = _number(value)
    if n is None or not _finite(n) or not 0 < n <= 1:
        raise _fail(key, value, "must be a number in (0, 1].")
    return n


def _positive_finite(key: str, value: object) -> float:
    n = _number(value)
    if n is None or not _finite(n) or n <= 0:
        raise _fail(key, value, "must be a positive finite number.")
    return n


def _string(key: str, value: object) -> str:
    if not isinstance(value, str):
        msg = f"BasicCompactConfig: {key} must be a string."
        raise CompactConfigError(msg, key=key)
    return value


def _boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        msg = f"BasicCompactConfig: {key} must be a boolean."
        raise CompactConfigError(msg, key=key)
    return value


# (attribute, reference key, validator), in the order the reference checks them.
_RULES: tuple[tuple[str, str, Callable[[str, object], Any]], ...] = (
    ("context_window", "contextWindow", _positive_integer),
    ("threshold_ratio", "thresholdRatio", _ratio),
    ("retain_tokens", "retainTokens", _non_negative_integer),
    ("summarization_model", "summarizationModel", _string),
    ("max_tokens", "maxTokens", _positive_integer),
    ("compaction_retries", "compactionRetries", _non_negative_integer),
    ("auto", "auto", _boolean),
    ("chars_per_token", "charsPerToken", _positive_finite),
)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class BasicCompactConfig:
    """The basic compaction backend's policy, validated when built.

    :param context_window: the model's context window, in tokens (positive integer).
    :param threshold_ratio: compact when the estimated request reaches
        ``floor(context_window * threshold_ratio)`` tokens; a number in (0, 1].
    :param retain_tokens: keep at least this many tokens of the newest surface nodes
        verbatim (non-negative integer; larger than the window is accepted).
    :param summarization_model: the model that writes summaries; ``""`` means the
        caller's (the agent's) model.
    :param max_tokens: the generation cap of a summarization call (positive integer).
    :param compaction_retries: extra compactions allowed when one is not enough
        (non-negative integer).
    :param auto: whether :meth:`Compactor.auto_compact` does anything.
    :param chars_per_token: characters per token for the estimates (positive, finite,
        may be fractional).
    :raises CompactConfigError: a value breaks its rule (the first one, in this order).
    """

    context_window: int
    threshold_ratio: float
    retain_tokens: int
    summarization_model: str
    max_tokens: int
    compaction_retries: int
    auto: bool = True
    chars_per_token: float = 4

    def __post_init__(self) -> None:
        for attr, key, check in _RULES:
            # Integral floats are normalised to ints, as JS has one number type.
            object.__setattr__(self, attr, check(key, getattr(self, attr)))

    @property
    def threshold(self) -> int:
        """``floor(context_window * threshold_ratio)``: the pressure that triggers."""
        return math.floor(self.context_window * self.threshold_ratio)


def resolve_config(raw: Mapping[str, Any]) -> BasicCompactConfig:
    """Build a config from the reference's camelCase keys (``contextWindow``...).

    A missing required key is reported as the reference reports it (``contextWindow
    (undefined) must be a positive integer.``); keys the reference does not know are
    ignored, as its runtime ignores them.

    :param raw: the configuration, e.g. parsed from JSON or TOML.
    :raises CompactConfigError: a value breaks its rule.
    """
    values: dict[str, Any] = {}
    for attr, key, _check in _RULES:
        if key in raw:
            values[attr] = raw[key]
        elif key not in ("auto", "charsPerToken"):
            values[attr] = _MISSING  # fails its check with the reference's message
    return BasicCompactConfig(**values)
