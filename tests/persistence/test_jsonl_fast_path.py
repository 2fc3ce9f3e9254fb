"""The JSONL backend's default-mode path (issue 25, point 4): a writer that releases a
session and takes it back keeps its lock file's descriptor and what it knows of the log's
end between the two, so taking it back costs a flock, a few stats and one small read.
What it kept must never hide what another writer did meanwhile: a session deleted and
made anew, a lock file removed, a log rewritten by hand in place. And ``lines_of_types``
(one pass over the log's bytes) returns exactly the lines of those types, or ``None``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import open_store
from dsh_session_core._logformat.ranges import lines_of_types_in
from dsh_session_core.errors import SessionLockedError
from lifecycle_support import user_texts

# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "jsonl+zstd")

def _say(store: object, session: object, text: str) -> None:
    with session.turn() as turn:  # type: ignore[attr-defined]
        turn.user(text)
    store.release(session)  # type: ignore[attr-defined]


def test_a_session_made_anew_elsewhere_gets_the_writes_that_follow(store_url: str) -> None:
    # Another store (another process) deletes the session and makes it anew while this
    # one has it released. Taken back, it loads the new log, and what it writes then
    # must go into that log, not into the file the delete removed (which the append
    # descriptor kept from before would still write to).
    with open_store(store_url) as store, open_store(store_url) as other:
        mine = store.create("s")
        _say(store, mine, "one")
        other.delete("s")
        _say(other, other.create("s"), "another one")
        back = store.open("s", resume=mine)
        assert user_texts(back) == ["another one"]
        _say(store, back, "mine, after")
        assert user_texts(other.read_session("s")) == ["another one", "mine, after"]
        again = store.open("s", resume=back)
        _say(store, again, "and again")
    with open_store(store_url) as fresh:
        assert user_texts(fresh.read_session("s")) == ["another one", "mine, after", "and again"]


#: The files the taking back of a session opened, while ``_WATCH`` is set (an audit hook
#: is for the life of the process: it records only then).
_OPENED: list[tuple[str, Any]] = []
_WATCH: list[bool] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _WATCH and event in ("open", "os.mkdir", "os.scandir", "os.listdir"):
        _OPENED.append((event, args[0]))


sys.addaudithook(_audit)  # once: a hook added per test would record each event again


def test_taking_a_released_session_back_opens_no_file_but_the_mark(store_url: str) -> None:
    # The default mode's call (take the lock, take the session back, append, release)
    # keeps the lock file and the log open between calls: it makes no folder, opens
    # neither file again, and reads the log's end through the descriptor it appends
    # with. It looks for a durable-end mark (a failed write's, maybe another
    # process's) every time: that is its one open, of a file almost never there.
    with open_store(store_url) as store:
        mine = store.create("s")
        _say(store, mine, "one")
        mine = store.open("s", resume=mine)
        _say(store, mine, "two")
        _OPENED.clear()
        _WATCH.append(True)
        try:
            again = store.open("s", resume=mine)
            _say(store, again, "three")
        finally:
            _WATCH.clear()
        assert again is mine
        log = store.backend.location(mine.header)
        assert [("open", log + ".durable")] == _OPENED
        assert user_texts(store.read_session("s")) == ["one", "two", "three"]


def test_a_lock_file_removed_meanwhile_is_not_the_lock(store_url: str) -> None:
    # The released lock's descriptor is kept, unlocked; the session is deleted, made
    # anew and held by another store: locking the kept descriptor (a removed file)
    # must not count as holding the session.
    with open_store(store_url) as store, open_store(store_url) as other:
        mine = store.create("s")
        _say(store, mine, "one")
        other.delete("s")
        theirs = other.create("s")
        with theirs.turn() as turn:
            turn.user("theirs")
        other.flush(theirs)  # held, not released
        with pytest.raises(SessionLockedError):
            store.open("s", resume=mine)
        other.release(theirs)
        back = store.open("s", resume=mine)
        assert user_texts(back) == ["theirs"]
        store.release(back)


def test_released_locks_let_other_writers_in(store_url: str) -> None:
    with open_store(store_url) as store, open_store(store_url) as other:
        mine = store.create("s")
        for i in range(3):
            _say(store, mine, f"mine {i}")
            theirs = other.open("s")  # the kept descriptor is unlocked: no wait
            with pytest.raises(SessionLockedError):
                store.open("s", resume=mine)
            _say(other, theirs, f"theirs {i}")
            mine = store.open("s", resume=mine)
        store.release(mine)
        assert user_texts(other.read_session("s")) == [
            t for i in range(3) for t in (f"mine {i}", f"theirs {i}")]


def test_a_log_rewritten_in_place_at_the_same_size_is_read(tmp_path: Path) -> None:
    # Same file, same size, only the last line's bytes differ (a hand edit of its
    # time): the end the writer knew is not the log's end any more.
    store_url = str(tmp_path / "logs")
    with open_store(store_url) as store:
        mine = store.create("s")
        _say(store, mine, "one")
        path = store.backend.location(mine.header)
        data = Path(path).read_bytes()
        start = data.rfind(b"\n", 0, len(data) - 1) + 1
        last = msgspec.json.decode(data[start:])
        edited = msgspec.json.encode({**last, "time": last["time"] + 1}) + b"\n"
        assert len(edited) == len(data) - start  # the same size, one digit changed
        with open(path, "r+b") as f:
            f.seek(start)
            f.write(edited)
        back = store.open("s", resume=mine)
        assert back is not mine  # loaded whole: the log no longer ends with its event
        assert back.events[-1].time == last["time"] + 1
        store.release(back)


def test_a_log_appended_by_another_writer_is_read(store_url: str) -> None:
    # A writer that is not ours (no lock, as the reference writes) appends a line:
    # the size differs from what the writer knew, so the file is read.
    with open_store(store_url) as store, open_store(store_url) as other:
        mine = store.create("s")
        _say(store, mine, "one")
        _say(other, other.open("s"), "two")
        back = store.open("s", resume=mine)
        assert user_texts(back) == ["one", "two"]
        store.release(back)


# --- lines_of_types: one pass ---------------------------------------------------------------

_TYPES = ["agents/item", "agents/pop", "agents/clear", "agents/other", "turn/start",
          "user/message", "agentsx"]
_TEXTS = ["plain", '"agents/item"', "agents/pop", "\\u0022agents/", "x\ny"]


@st.composite
def _logs(draw: st.DrawFn) -> tuple[bytes, list[dict[str, object]]]:
    """A log's bytes and its events; some lines written by hand (type not first)."""
    events = []
    lines = [b'{"type":"session","version":1,"id":"s","createdAt":0}']
    for seq in range(draw(st.integers(0, 12))):
        event = {"type": draw(st.sampled_from(_TYPES)), "seq": seq, "time": 1,
                 "data": {"text": draw(st.sampled_from(_TEXTS))}}
        events.append(event)
        if draw(st.integers(0, 9)) == 0:
            lines.append(msgspec.json.encode(dict(reversed(event.items()))))
        else:
            lines.append(msgspec.json.encode(event))
    torn = draw(st.sampled_from([b"", b'{"type":"agents/item","se']))
    return b"\n".join(lines) + b"\n" + torn, events


@settings(max_examples=300, deadline=None)
@given(_logs(), st.sets(st.sampled_from(_TYPES[:5]), min_size=1))
def test_lines_of_types_is_every_line_of_those_types_or_none(
    log: tuple[bytes, list[dict[str, object]]], types: set[str]
) -> None:
    body, events = log
    found = lines_of_types_in(body, types)
    if found is not None:
        assert [msgspec.json.decode(line) for line in found] == [
            e for e in events if e["type"] in types]
        assert all(b"\n" + line + b"\n" in body for line in found)  # the log's bytes
        return
    # Unsure only when a line may hide one of those types: one written by hand, a
    # string of the data that begins as the types do, or types that share no more
    # than the quote (every string then begins as they do).
    families = {t.split("/", 1)[0] for t in types}
    lines = body.split(b"\n")[1:-1]
    assert len(families) > 1 or any(
        not line.startswith(b'{"type":') or b'"agents/' in line.split(b",", 1)[1]
        for line in lines)


def test_lines_of_types_keeps_a_torn_tail_out() -> None:
    body = (b'{"type":"session","version":1,"id":"s","createdAt":0}\n'
            b'{"type":"agents/item","seq":0,"time":1,"data":{}}\n'
            b'{"type":"agents/item","seq":1,"time":1,"da')
    assert lines_of_types_in(body, ["agents/item"]) == [
        b'{"type":"agents/item","seq":0,"time":1,"data":{}}']


def test_the_ends_remembered_are_bounded_and_a_forgotten_one_is_read(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process writing many sessions keeps the ends of the most recent alone; a session
    # whose end was forgotten is taken back by reading its file's end, as correctly.
    from dsh_session_core._persistence.backends.jsonl import ends as jsonl_ends

    monkeypatch.setattr(jsonl_ends, "MAX_KNOWN_ENDS", 2)
    with open_store(store_url) as store, open_store(store_url) as other:
        first = store.create("first")
        _say(store, first, "one")
        for n in range(3):
            _say(store, store.create(f"s{n}"), "x")
        assert store.backend._logs.remembered() == 2  # type: ignore[attr-defined]
        again = store.open("first", resume=first)
        assert again is first  # its end read from the file: nobody wrote
        _say(store, again, "two")
        elsewhere = other.open("first")
        _say(other, elsewhere, "three")
        back = store.open("first", resume=again)
        assert user_texts(back) == ["one", "two", "three"]
