"""The ``langgraph/checkpoints`` projection: a saver that holds no index of a thread (a
fresh one) reads its checkpoints, writes and values from the rows the store keeps (the
log is not folded), and answers as the writer that holds the index; namespaces of any
name; a fresh saver's next put still stores a delta; a thread stored before the
projection (or before ``sources``) is read by folding its log until its rows can be
followed; ``list``'s values are lists of their own."""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path
from typing import Any

import msgspec
import pytest
from graph_support import build
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from old_thread_support import answer, history
from old_thread_support import build as build_old
from saver_support import checkpoint, checkpoint_events, config, put

from dsh_session_core import open_store
from dsh_session_langgraph import DshCheckpointSaver
from dsh_session_langgraph._index import ThreadIndex
from dsh_session_langgraph._projection import CheckpointRow, part

# Durable stores: a fresh saver opens the store anew (the differential test runs a
# memory store's too).
pytestmark = pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")

OLD = Path(__file__).resolve().parent / "old_thread"
NAME = "langgraph/checkpoints"


def _reads_rows(saver: DshCheckpointSaver, thread: str) -> None:
    """The saver read ``thread`` from the rows: it folded no log (it holds no index of
    it), and the store's rows fold the whole log (the store folded none of it)."""
    assert not saver._threads.held(thread)
    view = saver.store.projection(thread, NAME)
    assert view.folded == 0
    assert view.covers == len(saver.store.read(thread))


def _plain(found: Any) -> Any:
    """A checkpoint tuple (or a list of them) as comparable data."""
    if isinstance(found, list):
        return [_plain(t) for t in found]
    return None if found is None else found._asdict()


def _chat(saver: DshCheckpointSaver, turn: int, thread: str = "chat") -> None:
    """One turn of the tool-calling graph (a question, a tool call, its result, an
    answer), run to its end."""
    responses = [AIMessage(content="", tool_calls=[
        {"name": "weather", "args": {"city": f"City {turn}"}, "id": f"call-{turn}",
         "type": "tool_call"}]), AIMessage(content=f"Sunny in City {turn}. " * 5)]
    graph = build(saver, responses)
    run: RunnableConfig = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [HumanMessage(f"Weather {turn}?", id=f"h-{turn}")]}, run)
    graph.invoke(None, run)  # past the interrupt before the tool


# Namespaces a key part must escape (its separator, its escape, control characters),
# and one that would be a prefix of another's keys were they not.
SPACES = ["", "a", "a/b", "a%2Fb", "a\x01", "parent:1|child:2"]


def test_a_fresh_saver_reads_the_rows_and_answers_as_the_writer(store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        for n, ns in enumerate(SPACES):
            root = put(saver, "t", None, checkpoint({"n": n, "cfg": "c"}, {"n": 1, "cfg": 1}),
                       {"n": 1, "cfg": 1}, ns)
            parent = root
            for i in range(2, 6):
                parent = put(saver, "t", parent, checkpoint({"n": i, "cfg": "c"},
                                                            {"n": i, "cfg": 1}), {"n": i}, ns)
                saver.put_writes(config("t", ns, parent), [("n", i), ("__error__", "e")],
                                 task_id=f"task/{i}%")
            # A fork from the root: versions 2 and 3 of "n" again, with other values.
            forked = put(saver, "t", root, checkpoint({"n": -2, "cfg": "c"},
                                                      {"n": 2, "cfg": 1}), {"n": 2}, ns,
                         run_id="fork")
            # Version 3 made with no value (the other branch's has one).
            put(saver, "t", forked, checkpoint({"cfg": "c"}, {"n": 3, "cfg": 1}), {"n": 3}, ns,
                run_id="fork")
        put(saver, "u", None, checkpoint({"n": 0}, {"n": 1}), {"n": 1},
            run_id="run-1")
        reads: list[Any] = [*(config("t", ns) for ns in SPACES),
                            {"configurable": {"thread_id": "t"}}, None]

        def answers(s: DshCheckpointSaver) -> Any:
            out: list[Any] = []
            for c in reads:
                if c is not None and "checkpoint_ns" in c["configurable"]:
                    out.append(_plain(s.get_tuple(c)))
                tuples = list(s.list(c))
                out.append(_plain(tuples))
                out.append(_plain([s.get_tuple(t.config) for t in tuples]))
                out.append(_plain(list(s.list(c, limit=3, filter={"run_id": "fork"}))))
                out.append(_plain(list(s.list(c, filter={"run_id": "fork", "step": 0}))))
                if len(tuples) > 2:
                    out.append(_plain(list(s.list(c, before=tuples[2].config, limit=2))))
            return out

        expected = answers(saver)
    with DshCheckpointSaver(store_url) as fresh:
        assert answers(fresh) == expected
        _reads_rows(fresh, "t")
        _reads_rows(fresh, "u")


@given(st.lists(st.text(), min_size=2, max_size=2, unique=True))
def test_a_key_part_holds_no_separator_and_names_one_text(texts: list[str]) -> None:
    a, b = map(part, texts)
    assert "/" not in a
    assert "/" not in b
    assert a != b
    assert not (a + "/").startswith(b + "/")


@given(st.lists(st.text(string.hexdigits + "-" + string.ascii_letters), min_size=2,
                max_size=2))
def test_a_key_part_keeps_the_order_of_ids(ids: list[str]) -> None:
    a, b = ids
    assert (part(a) < part(b)) == (a < b)


def test_a_fresh_saver_goes_on_with_deltas(store_url: str) -> None:
    for turn in range(4):
        with DshCheckpointSaver(store_url) as fresh:  # a new process each turn
            _chat(fresh, turn)
    events = [e.data for e in checkpoint_events(store_url, "chat")]
    blobs = [d.blobs["messages"] for d in events if "messages" in d.blobs]
    assert blobs[0].base is None
    assert all(b.base is not None for b in blobs[1:])  # not a full list per new saver
    with DshCheckpointSaver(store_url) as fresh:
        state = build(fresh, []).get_state({"configurable": {"thread_id": "chat"}})
        assert len(state.values["messages"]) == 16
        _reads_rows(fresh, "chat")


def test_a_thread_stored_before_the_projection_is_folded_until_a_write_keeps_rows(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(OLD / "store", store)
    cfg: RunnableConfig = {"configurable": {"thread_id": "old"}}
    expected = json.loads((OLD / "history.json").read_text())
    with open_store(str(store)) as plain:
        view = plain.projection("old", NAME)
        assert view.folded == view.covers  # no rows: the store folds the log
    with DshCheckpointSaver(str(store)) as fresh:
        assert history(build_old(fresh, [])) == expected
        assert fresh._threads.held("old")  # read through its index, folded once
    with DshCheckpointSaver(str(store)) as saver:
        graph = build_old(saver, [answer("Rainy in Rome.", 3)])
        graph.invoke(None, cfg)  # the tool call it was left before: a write
        now = history(graph)
        latest = _plain(saver.get_tuple(cfg))
    with DshCheckpointSaver(str(store)) as fresh:
        assert _plain(fresh.get_tuple(cfg)) == latest  # the new checkpoint's rows
        _reads_rows(fresh, "old")
        # The old checkpoints hold no sources: the history folds the log.
        assert history(build_old(fresh, [])) == now
        assert fresh._threads.held("old")


def test_a_value_whose_rows_cannot_be_followed_is_read_by_folding_the_log(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:  # a saver before sources: none recorded
        patched.setattr(ThreadIndex, "sources", lambda self, d: None)
        with DshCheckpointSaver(store_url) as saver:
            for turn in range(3):  # the messages at places 0 to 11 of their chain
                _chat(saver, turn)
    assert all(e.data.sources is None for e in checkpoint_events(store_url, "chat"))
    with DshCheckpointSaver(store_url) as saver:
        # Places 12 to 15: the last one's chain is 15, 14, 12, 8 (a delta without
        # sources: its base cannot be followed) and 0.
        _chat(saver, 3)
        expected = _plain(list(saver.list(config("chat"))))
        latest = _plain(saver.get_tuple(config("chat")))
    with DshCheckpointSaver(store_url) as fresh:
        assert _plain(fresh.get_tuple(config("chat"))) == latest
        assert fresh._threads.held("chat")
    with DshCheckpointSaver(store_url) as fresh:
        assert _plain(list(fresh.list(config("chat")))) == expected


class CountingSerde(JsonPlusSerializer):
    """LangGraph's serializer, counting the values it decodes."""

    decoded = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        CountingSerde.decoded += 1
        return super().loads_typed(data)


def test_list_deserializes_each_piece_once_and_gives_each_checkpoint_values_of_its_own(
        store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        for turn in range(3):
            _chat(saver, turn)
        expected = _plain(list(saver.list(config("chat"))))
    pieces = {id(b) for e in checkpoint_events(store_url, "chat") for b in e.data.blobs.values()}
    for holds_index in (False, True):
        with DshCheckpointSaver(store_url, serde=CountingSerde()) as fresh:
            if holds_index:
                fresh._threads.read("chat")
            CountingSerde.decoded = 0
            tuples = list(fresh.list(config("chat")))
            writes = sum(len(t.pending_writes or ()) for t in tuples)
            # Each blob (a piece) at most once, each write's value once: not each
            # checkpoint's whole chain (12 messages' pieces, 18 checkpoints).
            assert CountingSerde.decoded <= len(pieces) + writes
            assert _plain(tuples) == expected
            lists = [t.checkpoint["channel_values"]["messages"] for t in tuples
                     if "messages" in t.checkpoint["channel_values"]]
            assert len(lists) > 3
            # No list, and no message, is another checkpoint's.
            messages = [m for v in lists for m in v]
            assert len({id(v) for v in lists}) == len(lists)
            assert len({id(m) for m in messages}) == len(messages)
            before = [[m.content for m in v] for v in lists]
            lists[1].append(HumanMessage("mine"))
            lists[2].clear()
            lists[0][0].content = "changed"
            assert [[m.content for m in v] for v in lists[3:]] == before[3:]


def test_the_rows_hold_no_message_ids_recorded(store_url: str) -> None:
    """``recorded`` serves the writer, which folds the log: the rows leave it out."""
    with DshCheckpointSaver(store_url) as saver:
        _chat(saver, 0)
    with open_store(store_url) as store:
        rows = [row for _, row in store.projection("chat", NAME).rows(prefix="c/")
                if isinstance(row.item, CheckpointRow)]
        assert len(rows) == len(checkpoint_events(store_url, "chat"))
        assert all(not row.item.data.recorded for row in rows)
        assert any(e.data.recorded for e in checkpoint_events(store_url, "chat"))
        assert b"recorded" not in msgspec.json.encode(rows)
