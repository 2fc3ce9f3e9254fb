"""``Projection.decode_rows``: stored rows decoded in one call give what decoding each
row alone gives, and a row that does not decode alone is refused as alone, whatever
rows stand beside it (the batch joins them into one JSON array: rows that together
would make other values must not pass)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_session_core.testing.projection_contract import Text, contract_projection

ENCODE = msgspec.json.encode
texts = st.text(max_size=40)


@given(st.lists(texts, max_size=30))
def test_the_batch_gives_each_rows_own_decode(values: list[str]) -> None:
    rows = [ENCODE(Text(v)) for v in values]
    assert contract_projection.decode_rows(rows) == [
        contract_projection.decode_row(r) for r in rows]
    assert contract_projection.decode_rows(rows) == [Text(v) for v in values]


@given(st.lists(texts, min_size=1, max_size=10), st.data())
def test_a_damaged_row_is_refused_as_alone(values: list[str], data: st.DataObject) -> None:
    rows = [ENCODE(Text(v)) for v in values]
    at = data.draw(st.integers(0, len(rows) - 1))
    cut = data.draw(st.integers(0, len(rows[at]) - 1))
    rows[at] = rows[at][:cut]  # truncated: not a row
    with pytest.raises(msgspec.DecodeError):
        contract_projection.decode_row(rows[at])
    with pytest.raises(msgspec.DecodeError):
        contract_projection.decode_rows(rows)


@pytest.mark.parametrize("rows", [
    # Two halves that joined make one row: counted, refused.
    [b'{"text":"a"', b'"b":1}'],
    # Halves that joined make as many rows as were given.
    [b'{"text":"a","x":[1', b'2]},{"text":"b"}'],
    # A row of two rows.
    [b'{"text":"a"},{"text":"b"}', b'{"text":"c"}'],
])
def test_rows_that_only_decode_together_are_refused(rows: list[bytes]) -> None:
    with pytest.raises(msgspec.DecodeError):
        contract_projection.decode_rows(rows)
