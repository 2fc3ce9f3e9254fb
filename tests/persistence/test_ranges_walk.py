"""The lines after a seq, found by bisection and a walk in memory, equal a plain read's,
whatever the lines' lengths (short ones by the thousand, lines longer than the walk's
read, a head cut by a read's end)."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core._logformat.ranges import lines_in

HEADER = b'{"type":"session","version":0,"id":"x","createdAt":1}\n'


def _log(sizes: list[int]) -> tuple[bytes, list[bytes]]:
    lines = [b'{"type":"user/message","seq":%d,"time":1,"data":"%s"}'
             % (seq, b"x" * size) for seq, size in enumerate(sizes)]
    return HEADER + b"".join(line + b"\n" for line in lines), lines


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 40), st.integers(4000, 20000)), min_size=1,
                max_size=400),
       st.integers(-1, 410), st.one_of(st.none(), st.integers(0, 5)))
def test_the_lines_after_a_seq_are_those_a_plain_read_gives(
        sizes: list[int], after: int, limit: int | None) -> None:
    body, lines = _log(sizes)
    want = lines[max(after + 1, 0):]
    want = want if limit is None else want[:limit]
    assert lines_in(io.BytesIO(body), len(body), after, limit) == want
