"""Every provider converter over the whole corpus (the reference's logs and the demo's
sessions) and over generated histories: what it sends is what the provider's own SDK
request types accept (and, where the API demands more, what it demands: Anthropic's
alternation; pydantic-ai's offline model running the corpus's histories)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from corpus import corpus_failures
from hypothesis import given, settings
from sdk_check import (
    check_anthropic,
    check_anthropic_turns,
    check_chat,
    check_pydantic_ai,
    check_responses,
    run_pydantic_ai,
)
from to_strategies import histories

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import (
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    to_pydantic_ai,
)


def _anthropic(history: Any) -> None:
    out = to_anthropic(history)
    check_anthropic(out)
    check_anthropic_turns(out)


def _pydantic_ai_runs(history: Any) -> None:
    out = to_pydantic_ai(history)
    check_pydantic_ai(out)
    run_pydantic_ai(out)


#: What each converter's output must pass, on a generated history.
CHECKS: dict[str, Callable[[Any], None]] = {
    "anthropic": _anthropic,
    "openai-chat": lambda history: check_chat(to_openai_chat(history)),
    "openai-responses": lambda history: check_responses(to_openai_responses(history)),
    "pydantic-ai": lambda history: check_pydantic_ai(to_pydantic_ai(history)),
}

#: On the corpus, pydantic-ai's offline model also runs each history (too slow for the
#: hundreds of generated ones).
CORPUS_CHECKS = {**CHECKS, "pydantic-ai": _pydantic_ai_runs}


@pytest.mark.parametrize("target", sorted(CORPUS_CHECKS))
def test_the_whole_corpus_converts_and_validates(target: str) -> None:
    assert corpus_failures(CORPUS_CHECKS[target]) == []


@pytest.mark.parametrize("target", sorted(CHECKS))
@settings(max_examples=300, deadline=None)
@given(history=histories)
def test_any_history_validates(target: str, history: list[v.Message]) -> None:
    CHECKS[target](history)
