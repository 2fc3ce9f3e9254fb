"""The default mode's read of the item view from stored lines (``_view.stored_view``):
the same items as the fold of the loaded events; a line of another layout is never
read as an item."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import open_store
from dsh_session_openai_agents import fold_items, record_items
from dsh_session_openai_agents._view import VIEW_TYPES, stored_view

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_items = st.lists(st.dictionaries(st.text(max_size=5), _json, max_size=4), min_size=1,
                  max_size=8)


@settings(max_examples=60, deadline=None)
@given(items=_items)
def test_items_alone_read_as_the_events_fold(tmp_path_factory: Any, items: list[Any]) -> None:
    folder: Path = tmp_path_factory.mktemp("logs")
    with open_store(str(folder)) as store:
        session = store.create("view")
        record_items(session, items)
        store.flush(session)
        expected = [item for _, item in fold_items(session.events)]
        lines = store.read_lines("view", types=VIEW_TYPES)
    assert expected == items
    assert stored_view(lines) == items


def _line(data: bytes, tail: bytes = b"") -> bytes:
    return b'{"type":"agents/item","seq":4,"time":1700000000000,"data":' + data + tail + b"}"


def test_a_line_of_another_layout_is_not_read_as_an_item() -> None:
    plain = _line(b'{"item":{"a":1}}')
    assert stored_view([plain]) == [{"a": 1}]
    for odd in (
        _line(b'{"item":{"a":1},"extra":2}'),  # a key the payload does not have
        _line(b'{"items":{"a":1}}'),
        b'{"type":"agents/item","seq":"4","time":1,"data":{"item":1}}',
        b'{"type":"agents/pop","seq":5,"time":1,"data":{}}',
    ):
        assert stored_view([plain, odd]) is None, odd
    pop = b'{"type":"agents/pop","seq":5,"time":1,"data":{"itemSeq":4}}'
    assert stored_view([plain, pop]) == []
