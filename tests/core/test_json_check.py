"""The JSON check of appended data (``_json.json_problem``) finds a problem exactly when
its path-naming walk does: the quick walk that answers the common case (no problem)
agrees with it on every value, at every depth limit."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import JsonObject
from dsh_session_core._base.json_values import MAX_JSON_DEPTH, _fits, _problem, json_problem


class Point(msgspec.Struct):
    x: Any
    y: int = 0


_scalars = (st.none() | st.booleans() | st.integers() | st.text(max_size=3)
            | st.floats(allow_nan=True, allow_infinity=True) | st.binary(max_size=2))


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.text(max_size=2) | st.integers(0, 3)
    return (st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(keys, inner, max_size=3)
            | st.dictionaries(st.text(max_size=2), inner, max_size=3).map(JsonObject)
            | st.frozensets(st.integers(), max_size=2)
            | st.builds(Point, inner))


_values = st.recursive(_scalars, _extend, max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(value=_values, limit=st.sampled_from([0, 1, 2, 3, MAX_JSON_DEPTH - 1]))
def test_the_quick_walk_agrees_with_the_naming_walk(value: Any, limit: int) -> None:
    assert _fits(value, 0, limit, False, set()) == (_problem(value, limit) is None)


@pytest.mark.parametrize("level", [0, 1])
def test_deep_and_cyclic_values_are_found(level: int) -> None:
    deep: list[Any] = []
    chain = deep
    for _ in range(MAX_JSON_DEPTH + 5):
        chain.append([])
        chain = chain[0]
    cyclic: dict[str, Any] = {}
    cyclic["a"] = cyclic
    cyclic["b"] = cyclic  # two ways back: a walk without a path set would not end
    shared = [1]
    for value, found in ((deep, True), (cyclic, False), ([shared, shared], None)):
        problem = json_problem(value, level=level)
        assert (problem is None) == (found is None)
        if found is not None:
            assert problem is not None
            assert problem[1] is found
