"""Channel values stored as deltas: a list that extends its parent's value is stored as
the elements it adds to an earlier value of its chain (skip-deltas) and that value's
version, a read joining at most ``PIECES`` pieces; reads join them back; rewrites
(``delete_for_runs``, ``prune``) keep every kept value whole; a thread stored before
deltas existed reads and goes on; a damaged chain is named."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from graph_support import build
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from old_thread_support import answer, history
from old_thread_support import build as build_old
from saver_support import checkpoint, checkpoint_events, config, put, stored

from dsh_session_core import PersistenceError, open_store
from dsh_session_langgraph import DshCheckpointSaver, _codec, _deltas
from dsh_session_langgraph._messages import write_turn

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

OLD = Path(__file__).resolve().parent / "old_thread"


def _chat(saver: DshCheckpointSaver, turns: int, thread: str = "chat",
          run_ids: list[str] | None = None) -> None:
    """``turns`` turns of the tool-calling graph: a question, a tool call, its result
    and an answer each (four new messages a turn, each step adding one)."""
    for turn in range(turns):
        responses = [AIMessage(content="", tool_calls=[
            {"name": "weather", "args": {"city": f"City {turn}"}, "id": f"call-{turn}",
             "type": "tool_call"}]), AIMessage(content=f"Sunny in City {turn}. " * 20)]
        graph = build(saver, responses)
        # A configurable run_id is the checkpoints' metadata["run_id"].
        run: RunnableConfig = {"configurable": {"thread_id": thread} if run_ids is None
                               else {"thread_id": thread, "run_id": run_ids[turn]}}
        graph.invoke({"messages": [HumanMessage(f"Weather {turn}?", id=f"h-{turn}")]}, run)
        graph.invoke(None, run)  # past the interrupt before the tool


def _values(saver: DshCheckpointSaver, thread: str = "chat") -> dict[str, Any]:
    """Each checkpoint's channel values, by id."""
    return {t.checkpoint["id"]: t.checkpoint["channel_values"]
            for t in saver.list(config(thread))}


def test_a_conversation_is_stored_as_what_each_step_adds(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_deltas, "RADIX", 2)  # a small chain, its places in binary
    monkeypatch.setattr(_deltas, "PIECES", 4)
    with DshCheckpointSaver(store_url) as saver:
        _chat(saver, 5)
        written = _values(saver)
    events = [e.data for e in checkpoint_events(store_url, "chat")]
    blobs = [d.blobs["messages"] for d in events if "messages" in d.blobs]
    assert len(blobs) == 20  # a version a step (adding one message): four a turn
    # Skip-deltas: the delta at place p extends the value at p with its lowest set bit
    # cleared; the place whose read would join more than 4 pieces (15: 8 + 4 + 2 + 1)
    # starts the chain again with a full value.
    places = [*range(15), *range(5)]
    assert [b.position for b in blobs] == places
    start = [0] * 15 + [15] * 5  # where each one's chain starts
    for i, (blob, p) in enumerate(zip(blobs, places, strict=True)):
        if p == 0:
            assert blob.base is None
        else:
            assert blob.base == blobs[start[i] + (p & (p - 1))].version
    with DshCheckpointSaver(store_url) as fresh:
        codec = _codec.Codec(fresh.serde)
        for i, (blob, p) in enumerate(zip(blobs, places, strict=True)):
            # A delta holds the messages of the p & -p steps since its base; a full
            # value the whole list.
            assert len(codec.value(blob)) == (p & -p if p else i + 1)
        for d in events:  # no read joins more than 4 pieces
            assert len(fresh._threads.read("chat").chain(d, "messages")) <= 4  # type: ignore[union-attr]
        assert _values(fresh) == written  # a fresh saver joins them back alike
        state = build(fresh, []).get_state({"configurable": {"thread_id": "chat"}})
        assert [m.type for m in state.values["messages"]] == ["human", "ai", "tool", "ai"] * 5
    with open_store(store_url) as store:  # each message recorded once as a dsh event
        log = store.read_session("chat")
        assert [m.role for m in log.derive_messages()] == [
            "user", "assistant", "user", "assistant"] * 5


def test_a_list_is_a_delta_only_when_it_starts_with_the_very_same_values(
        store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        text = "".join(["some ", "text"])  # equal, not the same object
        parent = None
        # (the value, the version its blob extends). Each get_tuple below makes the
        # saver's tail the values it read back: equal to the next list's, never the same.
        steps: list[tuple[list[Any], int | None]] = [
            ([1, text], None),
            ([1, "some text", "more"], 1),  # equal int and str: the same serialization
            ([True, "some text", "more", 2], None),  # True == 1, but not serialized alike
            ([1.0], None),
            ([1.0, 3], None)]  # an equal float may not be the same (0.0 == -0.0)
        for n, (value, base) in enumerate(steps, start=1):
            parent = put(saver, "t", parent, checkpoint({"items": value}, {"items": n}),
                         {"items": n})
            latest = saver.get_tuple(config("t"))
            assert latest is not None
            got = latest.checkpoint["channel_values"]["items"]
            assert (got, [type(v) for v in got]) == (value, [type(v) for v in value])
            assert checkpoint_events(store_url, "t")[-1].data.blobs["items"].base == base


def test_rewrites_keep_every_kept_value_whole(store_url: str) -> None:
    runs = [str(uuid.uuid4()) for _ in range(3)]
    with DshCheckpointSaver(store_url) as saver:
        _chat(saver, 3, run_ids=runs)
        before = _values(saver)
        saver.delete_for_runs([runs[1]])  # the middle run: the last one's bases go
        after = _values(saver)
        assert after == {cid: v for cid, v in before.items() if cid in after}
        assert len(after) < len(before)
        last = [m.content for m in before[max(before)]["messages"]]
        saver.prune(["chat"], strategy="keep_latest")
        assert [m.content for m in _values(saver)[max(before)]["messages"]] == last
    with DshCheckpointSaver(store_url) as fresh:
        assert [m.content for m in _values(fresh)[max(before)]["messages"]] == last


def test_a_thread_stored_before_deltas_reads_and_goes_on(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(OLD / "store", store)
    cfg: RunnableConfig = {"configurable": {"thread_id": "old"}}
    expected = json.loads((OLD / "history.json").read_text())
    with DshCheckpointSaver(str(store)) as saver:
        graph = build_old(saver, [answer("Rainy in Rome.", 3), answer("Bye.", 4)])
        assert history(graph) == expected
        graph.invoke(None, cfg)  # the tool call it was left before
        graph.invoke({"messages": [HumanMessage("Bye", id="h-4")]}, cfg)
        now = history(graph)
    assert now[len(now) - len(expected):] == expected
    with DshCheckpointSaver(str(store)) as fresh:
        assert history(build_old(fresh, [])) == now
        state = build_old(fresh, []).get_state(cfg)
        assert [m.content for m in state.values["messages"]][-4:] == [
            "sunny in Rome, " + "warm " * 40, "Rainy in Rome.", "Bye", "Bye."]
    # The new checkpoints extend the old full values.
    events = checkpoint_events(str(store), "old")
    old = {e.data.id for e in events[:len(expected)]}
    new = [e.data.blobs["messages"] for e in events if e.data.id not in old
           and "messages" in e.data.blobs]
    assert new
    assert all(b.base is not None for b in new)


def test_a_delta_whose_base_is_gone_is_named(store_url: str) -> None:
    with DshCheckpointSaver(store_url) as saver:
        first = put(saver, "t", None, checkpoint({"items": ["a"]}, {"items": 1}),
                    {"items": 1})
        # A checkpoint extending version 7, which the thread never held (hand-made).
        made = checkpoint({"items": ["a", "b"]}, {"items": 8})
        good, _ = saver._codec.checkpoint_data(
            saver._threads.read("t"), "", first, made, {}, {"items": 8})  # type: ignore[arg-type]
        blob = msgspec.structs.replace(saver._codec.blob(["b"], 8), base=7)
        data = msgspec.structs.replace(good, blobs={"items": blob})
        with open_store(store_url) as store:
            session = store.open("t")
            index = saver._threads.read("t")
            assert index is not None
            write_turn(session, index, "langgraph/checkpoint", data)
            store.release(session)
    with DshCheckpointSaver(store_url) as fresh:
        assert fresh.get_tuple(config("t", checkpoint_id=first)) is not None
        with pytest.raises(PersistenceError) as caught:
            fresh.get_tuple(config("t"))
        message = str(caught.value)
        assert caught.value.session_id == "t"
        assert 'channel "items"' in message
        assert "extends version 7, which is not stored" in message
        assert stored(store_url, "t")  # nothing was changed


def test_a_forked_thread_finds_each_checkpoint_value_once(store_url: str) -> None:
    """After a fork, values are found through each checkpoint's ancestry; a channel
    written once before the fork is found from each checkpoint without walking the whole
    chain again at each one (a read of every checkpoint would cost the square)."""
    with DshCheckpointSaver(store_url) as saver:
        root = put(saver, "t", None, checkpoint({"config": "c", "n": 0}, {"config": 1, "n": 1}),
                   {"config": 1, "n": 1})
        put(saver, "t", root, checkpoint({"config": "c", "n": -1}, {"config": 1, "n": 2}),
            {"n": 2})  # a first child: the next one forks the namespace
        parent = root
        for i in range(1, 200):
            parent = put(saver, "t", parent, checkpoint({"config": "c", "n": i},
                                                        {"config": 1, "n": i + 1}),
                         {"n": i + 1})
    with DshCheckpointSaver(store_url) as fresh:
        got = [t.checkpoint["channel_values"] for t in fresh.list(config("t"))]
        assert got == [{"config": "c", "n": i} for i in range(199, 0, -1)] + [
            {"config": "c", "n": -1}, {"config": "c", "n": 0}]
        # A fresh saver reads the rows; one that holds the thread's index (a writer's)
        # reads the index, alike.
        index = fresh._threads.read("t")
        assert index is not None
        assert "" in index.forked
        assert [t.checkpoint["channel_values"] for t in fresh.list(config("t"))] == got
        # Each checkpoint's value of each channel found once, then known.
        assert len(index.found) <= 2 * len(index.checkpoints)
        before = dict(index.found)
        list(fresh.list(config("t")))
        assert index.found == before
