"""Issue 24: ``store.read_session(id)`` (and ``aread_session``) gives a read-only
``Session`` of what is stored: everything a reader does works (its events, the derived
messages, the providers' converters, forking it), every append is refused with
``ReadOnlySessionError``. It takes no writer lock (a session another process holds is
read), writes nothing (no crash repair: the log's bytes and mtime stay as they were),
and reads a torn last line leniently, leaving it out, as the readers do.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core import DurableStore, Message, TextBlock, ToolCallBlock, open_store
from dsh_session_core.errors import PersistenceError, ReadOnlySessionError, SessionLockedError
from dsh_session_core.providers import (
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    to_pydantic_ai,
)
from lifecycle_support import held_by_another_process, store_url

ALL_KINDS = ("jsonl", "jsonl+zstd", "sqlite", "postgresql", "memory")
SHARED_KINDS = ("jsonl", "jsonl+zstd", "sqlite", "postgresql")


def _write(store: DurableStore, session_id: str = "chat") -> None:
    """A session of two turns, the first with an answered tool call; released."""
    session = store.create(session_id, cwd="/work")
    with session.turn() as turn:
        turn.user("Which files?")
        with turn.step() as step:
            reply = step.assistant([ToolCallBlock(id="c1", name="ls", arguments="{}")])
            (block,) = reply.data.content
            assert isinstance(block, ToolCallBlock)
            step.tool_result(step.tool_call(block), "a.txt")
        with turn.step() as step:
            step.assistant("One file: a.txt.")
    with session.turn() as turn:
        turn.user("Thanks")
        with turn.step() as step:
            step.assistant("You are welcome.")
    store.release(session)


def _text(message: Message) -> str:
    block = message.content[0]
    assert isinstance(block, TextBlock)
    return block.text


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its mtime, but SQLite's shared-memory index, which
    a reader writes by design (its read marks)."""
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith("-shm")}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_it_reads_what_open_resumes_and_every_reader_works(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with open_store(store_url(kind, request, tmp_path)) as store:
        _write(store)
        read = store.read_session("chat")
        assert read.read_only
        assert not read.created
        opened = store.open("chat")
        assert not opened.read_only
        assert read.to_jsonl() == opened.to_jsonl()
        assert read.header == opened.header
        assert [e.type for e in read.events] == [e.type for e in opened.events]
        assert read.derive_messages() == opened.derive_messages()
        assert [m.role for m in read.derive_messages()] == [
            "user", "assistant", "user", "assistant", "user", "assistant"]
        for convert in (to_openai_chat, to_openai_responses, to_anthropic):
            assert convert(read) == convert(opened)
        # pydantic-ai stamps each part with the time of the conversion: the parts then.
        assert [[type(p) for p in m.parts] for m in to_pydantic_ai(read)] == [
            [type(p) for p in m.parts] for m in to_pydantic_ai(opened)]
        assert to_openai_chat(read)[-1] == {"role": "assistant",
                                            "content": "You are welcome."}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_append_is_refused_and_nothing_changes(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with open_store(store_url(kind, request, tmp_path)) as store:
        _write(store)
        before = store.read("chat")
        read = store.read_session("chat")
        length = len(read.events)
        attempts: list[Any] = [
            lambda: read.append("turn/start", {"turn": 3, "trigger": {
                "kind": "message", "source": {"kind": "user"}}}),
            lambda: read.turn(),
            lambda: read.inject("a note"),
        ]
        for attempt in attempts:
            with pytest.raises(ReadOnlySessionError, match=r"store\.open\('chat'\)") as info:
                attempt()
            assert info.value.session_id == "chat"
            assert "read_session" in str(info.value)
        assert len(read.events) == length
        store.flush(read)  # nothing to write: nothing happens
        store.release(read)
        assert store.read("chat") == before
        assert store.get("chat") is None
        # Nothing bound it: the session opens for writing here at once.
        writer = store.open("chat")
        with writer.turn() as turn:
            turn.user("more")
        store.flush(writer)
        assert len(store.read("chat")) == length + 3


@pytest.mark.parametrize("kind", SHARED_KINDS)
def test_a_session_another_process_writes_is_read_without_waiting_or_writing(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    with open_store(url) as store:
        _write(store)
    with held_by_another_process(url, "chat") as holder, open_store(url) as store:
        with pytest.raises(SessionLockedError) as locked:
            store.open("chat")
        # The lock's message points here, and to the CLI's readers.
        assert "store.read_session('chat')" in str(locked.value)
        assert "dsh-session show chat" in str(locked.value)
        files = _files(tmp_path)
        read = store.read_session("chat")
        assert _files(tmp_path) == files  # not a byte, not an mtime
        assert len(read.events) == 17
        assert _text(read.derive_messages()[-1]) == "You are welcome."
        assert holder.poll() is None  # still holding it


def _torn_log(tmp_path: Path) -> Path:
    """A JSONL store whose session a crash cut short: a turn left open, and a torn
    last line."""
    with open_store(tmp_path / "store") as store:
        session = store.create("crashed")
        turn = session.turn()
        turn.user("half")
        store.flush(session)
        store.detach(session)  # the process "dies": nothing more is written
    (log,) = (tmp_path / "store").rglob("crashed.jsonl")
    with open(log, "ab") as f:
        f.write(b'{"type":"step/start","seq":2,"ti')
    return log


def test_a_torn_tail_is_left_out_and_nothing_is_repaired(tmp_path: Path) -> None:
    log = _torn_log(tmp_path)
    before = log.read_bytes(), os.stat(log).st_mtime_ns
    with open_store(tmp_path / "store") as store:
        read = store.read_session("crashed")
        assert [e.type for e in read.events] == ["turn/start", "user/message"]
        assert (log.read_bytes(), os.stat(log).st_mtime_ns) == before
        assert _text(read.derive_messages()[0]) == "half"
        # open, the writer, repairs it: the torn line cut, the turn closed.
        opened = store.open("crashed")
        assert [e.type for e in opened.events] == ["turn/start", "user/message", "turn/end"]
    assert log.read_bytes() != before[0]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_cut_of_a_log_reads_as_the_stored_events(tmp_path: Path, data: st.DataObject
                                                     ) -> None:
    # Wherever a crash cut the log (past its header line), read_session gives exactly
    # the events a reader reads (store.read), and writes nothing.
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    with open_store(root) as store:
        _write(store, "s")
    (log,) = root.rglob("s.jsonl")
    whole = log.read_bytes()
    header_end = whole.index(b"\n") + 1
    cut = data.draw(st.integers(header_end, len(whole)), label="cut")
    log.write_bytes(whole[:cut])
    before = log.read_bytes(), os.stat(log).st_mtime_ns
    with open_store(root) as store:
        if cut == header_end:  # no event: read as stored, empty
            assert len(store.read_session("s").events) == 0
        else:
            read = store.read_session("s")
            assert list(read.events) == store.read("s")
            assert read.to_jsonl().startswith(whole[:header_end])
            assert read.to_jsonl()[header_end:] == b"".join(
                line + b"\n" for line in whole[header_end:cut].split(b"\n")[:-1])
    assert (log.read_bytes(), os.stat(log).st_mtime_ns) == before


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_session_live_here_reads_as_far_as_it_is_flushed(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with open_store(store_url(kind, request, tmp_path)) as store:
        live = store.create("live")
        with pytest.raises(PersistenceError, match='session "live" not found'):
            store.read_session("live")  # stored from its first flushed event on
        with live.turn() as turn:
            turn.user("flushed")
        store.flush(live)
        with live.turn() as turn:
            turn.user("not yet")
        read = store.read_session("live")
        assert [e.seq for e in read.events] == [0, 1, 2]
        assert list(read.events) == store.read("live")
        assert store.get("live") is live  # the writer is left as it was
        store.flush(live)
        assert len(store.read("live")) == 6


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_missing_session_is_not_found(kind: str, request: pytest.FixtureRequest,
                                        tmp_path: Path) -> None:
    with (open_store(store_url(kind, request, tmp_path)) as store,
          pytest.raises(PersistenceError) as caught):
        store.read_session("nope")
    # The reference's message (``match`` would read its note too: what to do).
    assert str(caught.value) == 'session "nope" not found'


@pytest.mark.parametrize("kind", SHARED_KINDS)
def test_a_read_session_forks_while_another_process_holds_it(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    with open_store(url) as store:
        _write(store)
    with held_by_another_process(url, "chat"), open_store(url) as store:
        parent = store.read("chat")
        read = store.read_session("chat")
        first_turn_end = next(e.seq for e in read.events if e.type == "turn/end")
        child = store.fork(read, first_turn_end, "chat-branch")
        assert child.created
        assert child.header.parent_session == "chat"
        assert list(child.events) == list(read.events)[: first_turn_end + 1]
        with child.turn() as turn:
            turn.user("another way")
        store.flush(child)
        assert store.read("chat") == parent  # the parent untouched
        assert len(store.read("chat-branch")) == first_turn_end + 4


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_aread_session(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = store_url(kind, request, tmp_path)

    async def main() -> tuple[bool, int]:
        async with open_store(url) as store:
            _write(store)
            read = await store.aread_session("chat")
            return read.read_only, len(read.events)

    assert asyncio.run(main()) == (True, 17)
