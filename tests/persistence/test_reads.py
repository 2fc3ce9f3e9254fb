"""Issue 17, point 3: reads that return part of a session read only that part.
``store.read(id, after=, limit=)`` and ``store.tail(id, n)`` (and their async twins) give
exactly the slices of the stored log on every backend; the JSONL binary search
(``_logformat/ranges.py``) finds any seq in logs of lines short and long (over its
64 KiB block), leaves a torn tail out, and a log it cannot read that way (keys in
another order) is read whole instead, with the same answer."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core import encode_event, open_store
from dsh_session_core._logformat.ranges import lines_after, lines_of_types
from dsh_session_core._persistence.base import stored_lines
from dsh_session_core.errors import PersistenceError
from lifecycle_support import store_url

KINDS = ["jsonl", "jsonl+zstd", "sqlite", "postgresql", "memory"]


def _fill(store: Any, sid: str, turns: int, seed: int) -> None:
    rng = random.Random(seed)
    session = store.create(sid)
    for t in range(turns):
        with session.turn() as turn:
            turn.user("q" * rng.choice([1, 50, 3000, 70_000]))  # some lines over a block
            with turn.step() as step:
                step.assistant(f"answer {t}")
        if t % 3 == 0:
            store.flush(session)
    store.flush(session)


def _lines(store: Any, sid: str) -> list[bytes]:
    stored = store.backend.load_stored(sid, store.registry)
    assert stored is not None
    return stored_lines(stored)


@pytest.mark.parametrize("kind", KINDS)
def test_read_and_tail_are_slices_of_the_log(kind: str, request: pytest.FixtureRequest,
                                             tmp_path: Path) -> None:
    with open_store(store_url(kind, request, tmp_path)) as store:
        _fill(store, "s", turns=40, seed=1)
        every = _lines(store, "s")
        n = len(every)
        cases = [(-1, None), (-1, 0), (-1, 5), (0, 1), (n // 2, 7), (n - 2, None),
                 (n - 1, 3), (n + 5, 2), (-7, 2), (3, n * 2)]
        for after, limit in cases:
            page = store.read("s", after=after, limit=limit)
            expected = every[max(after + 1, 0):]
            expected = expected if limit is None else expected[:limit]
            assert [encode_event(e) for e in page] == expected, (after, limit)
        for count in (0, 1, 9, n, n + 3):
            assert [encode_event(e) for e in store.tail("s", count)] == (
                every[n - count:] if 0 < count <= n else every if count else [])
        with pytest.raises(PersistenceError, match="not found"):
            store.read("nosuch")
        with pytest.raises(PersistenceError, match="not found"):
            store.tail("nosuch", 3)
        with pytest.raises(ValueError, match="limit"):
            store.read("s", limit=-1)
        with pytest.raises(ValueError, match="count"):
            store.tail("s", -1)

        async def twins() -> tuple[list[Any], list[Any]]:
            return (await store.aread("s", after=4, limit=3), await store.atail("s", 2))

        page, last = asyncio.run(twins())
        assert [e.seq for e in page] == [5, 6, 7]
        assert [e.seq for e in last] == [n - 2, n - 1]


def _log(tmp_path: Path, sizes: list[int]) -> tuple[Path, list[bytes]]:
    lines = [b'{"type":"user/message","seq":%d,"time":1,"data":{"content":[{"type":"text",'
             b'"text":"%s"}],"source":{"kind":"user"}},"surfaceOp":"append"}' % (i, b"x" * n)
             for i, n in enumerate(sizes)]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"type":"session","version":0,"id":"x","createdAt":1}\n'
                     + b"".join(line + b"\n" for line in lines))
    return path, lines


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.sampled_from([0, 10, 200, 5000, 70_000, 140_000]), max_size=40),
       after=st.integers(-3, 45), limit=st.none() | st.integers(0, 50))
def test_the_binary_search_finds_every_seq(tmp_path: Path, sizes: list[int], after: int,
                                           limit: int | None) -> None:
    path, lines = _log(tmp_path, sizes)
    expected = lines[max(after + 1, 0):]
    assert lines_after(str(path), after, limit) == (
        expected if limit is None else expected[:limit])


def test_a_torn_tail_is_left_out(tmp_path: Path) -> None:
    path, lines = _log(tmp_path, [10] * 30)
    with path.open("ab") as f:
        f.write(b'{"type":"user/message","seq":30,"ti')
    assert lines_after(str(path), 25, None) == lines[26:]
    assert lines_after(str(path), 29, 5) == []


def test_a_log_in_another_key_order_is_read_whole(tmp_path: Path) -> None:
    # Written by hand with seq first: the search cannot read it, the answer is the same.
    with open_store(str(tmp_path / "store")) as store:
        _fill(store, "s", turns=6, seed=2)
        every = _lines(store, "s")
        path = Path(store.backend.location(store.backend.list()[0]))
    assert lines_after(str(path), 3, 2) == every[4:6]  # as written: found by the search
    data = path.read_bytes().split(b"\n", 1)[0] + b"\n"
    for original in every:
        wire = original.split(b",", 2)  # {"type":"..."  "seq":N  rest
        data += b"{" + wire[1] + b"," + wire[0][1:] + b"," + wire[2] + b"\n"
    path.write_bytes(data)
    assert lines_after(str(path), 3, 2) is None  # the search cannot read this log
    with open_store(str(tmp_path / "store")) as store:
        assert [e.seq for e in store.read("s", after=3, limit=2)] == [4, 5]


@pytest.mark.parametrize("kind", KINDS)
def test_a_page_of_summaries_is_the_whole_listing_cut(kind: str,
                                                      request: pytest.FixtureRequest,
                                                      tmp_path: Path) -> None:
    """``ls`` counts only the page it shows (``summaries_of``): the same counts as the
    whole listing's, in the page's order, a session deleted since left out."""
    from dsh_session_core._persistence.capabilities import summaries_of

    with open_store(store_url(kind, request, tmp_path)) as store:
        for i, turns in enumerate([1, 4, 2, 3]):
            _fill(store, f"s{i}", turns=turns, seed=i)
        every = {s.header.id: s for s in store.backend.summaries()}
        headers = {h.id: h for h in store.backend.list()}
        assert [every[f"s{i}"].turns for i in range(4)] == [1, 4, 2, 3]
        page = [headers["s3"], headers["s0"], headers["s2"]]
        assert summaries_of(store.backend, page) == [every["s3"], every["s0"], every["s2"]]
        live = store.get("s0")
        assert live is not None
        store.release(live)  # a live session cannot be deleted
        store.delete("s0")
        assert summaries_of(store.backend, page) == [every["s3"], every["s2"]]
        assert summaries_of(store.backend, []) == []


def _of_types(lines: list[bytes], types: tuple[str, ...]) -> list[bytes]:
    return [line for line in lines
            if any(line.startswith(b'{"type":"%s",' % t.encode()) for t in types)]


@pytest.mark.parametrize("kind", KINDS)
def test_read_lines_gives_the_lines_of_some_types(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """``store.read_lines(id, types=)``: the stored lines of those types, in log order,
    on every backend (JSONL searches the file's bytes; the others filter every line)."""
    with open_store(store_url(kind, request, tmp_path)) as store:
        _fill(store, "s", turns=12, seed=3)
        every = _lines(store, "s")
        for types in (("turn/start",), ("step/start", "step/end"),
                      ("user/message", "assistant/message", "turn/end"), ("no/such",), ()):
            assert store.read_lines("s", types=types) == _of_types(every, types), types
        with pytest.raises(PersistenceError, match="not found"):
            store.read_lines("nosuch", types=("turn/start",))
        got = asyncio.run(store.aread_lines("s", types=("turn/end",)))
        assert got == _of_types(every, ("turn/end",))


def test_lines_of_types_leaves_a_torn_tail_out(tmp_path: Path) -> None:
    path, lines = _log(tmp_path, [10] * 5)
    with path.open("ab") as f:
        f.write(b'{"type":"user/message","seq":5,"ti')
    assert lines_of_types(str(path), ("user/message",)) == lines
    assert lines_of_types(str(path), ("turn/end",)) == []


def test_lines_of_types_refuses_a_log_it_may_misread(tmp_path: Path) -> None:
    """A line of those types written another way (``seq`` first), or a string of the
    data that begins as the types do: the search answers ``None`` and the backend
    filters every line instead, with the right answer."""
    with open_store(str(tmp_path / "store")) as store:
        _fill(store, "s", turns=6, seed=4)
        every = _lines(store, "s")
        path = Path(store.backend.location(store.backend.list()[0]))
    types = ("step/start", "step/end")
    assert lines_of_types(str(path), types) == _of_types(every, types)
    data = path.read_bytes().split(b"\n", 1)[0] + b"\n"
    for original in every:
        wire = original.split(b",", 2)  # {"type":"..."  "seq":N  rest
        data += b"{" + wire[1] + b"," + wire[0][1:] + b"," + wire[2] + b"\n"
    path.write_bytes(data)
    assert lines_of_types(str(path), types) is None
    with open_store(str(tmp_path / "store")) as store:
        got = store.read_lines("s", types=types)  # every line: no type can be told
    assert len(got) == len(every)
    decoded = [msgspec.json.decode(line) for line in got]
    assert [w["seq"] for w in decoded if w["type"] in types] == [
        msgspec.json.decode(line)["seq"] for line in _of_types(every, types)]
    path, _ = _log(tmp_path, [3])
    path.write_bytes(path.read_bytes().replace(b'"text":"xxx"', b'"text":"user/message"'))
    assert lines_of_types(str(path), ("user/message",)) is None  # the type, in the data
