"""Issue 24: ``store.open_or_create(id, **create_options)`` (and ``aopen_or_create``):
the stored session resumed, else a new one; ``Session.created`` says which.

Race-safe on every durable backend: several processes calling it at once for one new id
end with one session and one creator, never a second creator whose first flush fails.
The deterministic race (the second store's lock acquisition lets a whole first writer
run, between its look and its lock) is the one a get-or-create written as "open, and
create when not found" loses: it would return a created session that can never be
written.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import DurableStore, open_store
from dsh_session_core.errors import LogFormatError, SessionLockedError
from lifecycle_support import held_by_another_process, store_url

ALL_KINDS = ("jsonl", "jsonl+zstd", "sqlite", "postgresql", "memory")
#: The kinds two processes can share.
SHARED_KINDS = ("jsonl", "jsonl+zstd", "sqlite", "postgresql")


def _say(session: Any, text: str) -> None:
    with session.turn() as turn:
        turn.user(text)
        with turn.step() as step:
            step.assistant(f"re: {text}")


def _texts(store: DurableStore, session_id: str) -> list[str]:
    return [e.data.content[0].text for e in store.read(session_id)
            if e.type == "user/message"]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_it_creates_once_then_opens(kind: str, request: pytest.FixtureRequest,
                                    tmp_path: Path) -> None:
    url = store_url(kind, request, tmp_path)
    store = open_store(url)
    try:
        first = store.open_or_create("chat", cwd="/work/a")
        assert first.created
        assert first.seq == 0
        assert first.header.cwd == "/work/a"
        _say(first, "one")
        assert store.open_or_create("chat") is first  # live here: that very session
        store.release(first)
        again = store.open_or_create("chat", cwd="/elsewhere")  # options: create only
        assert not again.created
        assert again.header.cwd == "/work/a"
        assert again.header.created_at == first.header.created_at
        _say(again, "two")
        store.flush(again)
        assert _texts(store, "chat") == ["one", "two"]
        assert [h.id for h in store.stored()] == ["chat"]
    finally:
        store.close()


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_open_and_create_say_whether_they_made_the_session(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with open_store(store_url(kind, request, tmp_path)) as store:
        made = store.create("a")
        assert made.created
        _say(made, "x")
        store.release(made)
        assert not store.open("a").created
        assert store.fork("a", child_id="b").created


@pytest.mark.parametrize("kind", SHARED_KINDS)
def test_a_creator_landing_between_the_look_and_the_lock_is_opened(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    with open_store(url) as first, open_store(url) as second:
        acquire = second.backend.acquire
        raced: list[str] = []

        def first_writer_wins(header: Any) -> Any:
            if not raced:  # the first lock taken: second's create of "x"
                raced.append(header.id)
                session = first.create("x")
                _say(session, "first")
                first.release(session)
            return acquire(header)

        second.backend.acquire = first_writer_wins  # type: ignore[method-assign]
        session = second.open_or_create("x")
        assert raced == ["x"]
        assert not session.created
        assert [e.type for e in session.events][:2] == ["turn/start", "user/message"]
        _say(session, "second")
        second.flush(session)  # no SessionExistsError: it writes the one session
        second.release(session)
        assert _texts(first, "x") == ["first", "second"]


_RACER = textwrap.dedent("""
    import sys
    from dsh_session_core import open_store
    from dsh_session_core.errors import SessionLockedError

    url, name = sys.argv[1], sys.argv[2]
    with open_store(url) as store:
        print("ready", flush=True)
        sys.stdin.readline()  # all start at once
        try:
            session = store.open_or_create("shared", cwd="/work")
        except SessionLockedError:
            print("locked", flush=True)
            raise SystemExit(0)
        with session.turn() as turn:
            turn.user(name)
        store.release(session)
        print("created" if session.created else "opened", flush=True)
""")


@pytest.mark.parametrize("kind", SHARED_KINDS)
def test_processes_racing_for_a_new_id_make_one_session_with_one_creator(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    with open_store(url):
        pass  # a SQLite or PostgreSQL store's schema, made before the race
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, url, f"p{i}"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for i in range(4)]
    for proc in racers:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
    for proc in racers:  # released together, as closely as pipes allow
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    said = {}
    for i, proc in enumerate(racers):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        said[f"p{i}"] = out.split()[-1]
    creators = [name for name, outcome in said.items() if outcome == "created"]
    assert len(creators) == 1, said
    writers = [name for name, outcome in said.items() if outcome != "locked"]
    with open_store(url) as store:
        assert [h.id for h in store.stored()] == ["shared"]
        texts = _texts(store, "shared")
        assert texts[0] == creators[0]  # the creator wrote first
        assert sorted(texts) == sorted(writers)
        types = [e.type for e in store.read("shared")]
        assert types == ["turn/start", "user/message", "turn/end"] * len(writers)


@pytest.mark.parametrize("kind", SHARED_KINDS)
def test_a_session_another_process_holds_is_refused_not_created_again(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    with open_store(url) as store:
        session = store.create("held")
        _say(session, "mine")
        store.release(session)
    with held_by_another_process(url, "held"), open_store(url) as store:
        with pytest.raises(SessionLockedError, match=r"store\.read_session\('held'\)"):
            store.open_or_create("held")
        assert store.get("held") is None
        assert _texts(store, "held") == ["mine"]


_UNFLUSHED_CREATOR = textwrap.dedent("""
    import sys
    from dsh_session_core import open_store

    with open_store(sys.argv[1]) as store:
        session = store.create("new")  # holds the id: nothing written yet
        print("holding", flush=True)
        sys.stdin.readline()
        session.append("turn/start", {"turn": 1, "trigger": {
            "kind": "message", "source": {"kind": "user"}}})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
""")


@pytest.mark.parametrize("kind", SHARED_KINDS)
def test_an_id_another_process_is_creating_is_refused_while_it_holds_it(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    with open_store(url):
        pass
    proc = subprocess.Popen([sys.executable, "-c", _UNFLUSHED_CREATOR, url],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "holding\n"
    with open_store(url) as store:
        try:
            with pytest.raises(SessionLockedError):
                store.open_or_create("new")
        finally:
            proc.communicate("go\n", timeout=60)
        assert proc.returncode == 0, proc.stderr
        # The creator's session is the one stored; now it is free, it is opened.
        session = store.open_or_create("new")
        assert not session.created
        assert [e.type for e in session.events] == ["turn/start", "turn/end"]


def test_an_unreadable_stored_log_is_not_replaced_by_a_new_session(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root) as store:
        session = store.create("bad")
        _say(session, "kept")
    (log,) = root.rglob("bad.jsonl")
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = b"{not json\n"  # committed corruption, not a torn tail
    log.write_bytes(b"".join(lines))
    before = log.read_bytes()
    with open_store(root) as store:
        with pytest.raises(LogFormatError, match="unparsable committed event"):
            store.open_or_create("bad")
        assert store.get("bad") is None
    assert log.read_bytes() == before


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_aopen_or_create(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = store_url(kind, request, tmp_path)

    async def main() -> tuple[bool, bool, list[str]]:
        async with open_store(url) as store:
            made = await store.aopen_or_create("chat", cwd="/work")
            _say(made, "one")
            await store.arelease(made)
            again = await store.aopen_or_create("chat")
            return made.created, again.created, _texts(store, "chat")

    assert asyncio.run(main()) == (True, False, ["one"])
