"""``DshSession.add_items`` is atomic (issue 25, point 3): a call that fails part way
leaves the session exactly as it was, stored and in memory, on every backend and in
both modes; the default mode sees another process's appends between its calls and
costs what it appends; two processes creating one new session never get a raw driver
error; the per-process table of turns is pruned after errors and cancellations.

The faults are real: a trigger of the real database refusing a row (SQLite,
PostgreSQL), a file-size limit of the real process (JSONL, jsonl+zstd: ``RLIMIT_FSIZE``
in a subprocess)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import open_store
from dsh_session_openai_agents import DshSession, _locks, fold_items
from lifecycle_support import at_once

ITEMS: list[Any] = [
    {"role": "user", "content": "What is in the folder?"},
    {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}",
     "id": "fc1", "status": "completed"},
    {"type": "function_call_output", "call_id": "c1", "output": "a.txt b.txt"},
    {"id": "m1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Two files.", "annotations": []}]},
]
#: A batch whose second item the fault refuses: its first is good, so a write that kept
#: part of a batch would show.
POISON: list[Any] = [{"role": "user", "content": "first of the batch"},
                     {"role": "user", "content": "FAIL-HERE " + "x" * 200_000},
                     {"role": "user", "content": "last of the batch"}]


def _stored_items(store_url: str) -> list[Any]:
    with open_store(store_url) as store:
        return [item for _, item in fold_items(store.read_session("s").events)]


SQLITE_TRIGGER = """CREATE TRIGGER refuse BEFORE INSERT ON events
    WHEN NEW.data LIKE '%FAIL-HERE%' BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END"""
PG_TRIGGER = ("""CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN
    IF NEW.data LIKE '%FAIL-HERE%' THEN RAISE EXCEPTION 'refused by trigger'; END IF;
    RETURN NEW; END $$ LANGUAGE plpgsql""",
              "CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH ROW "
              "EXECUTE FUNCTION refuse()")


def _install_trigger(store_url: str) -> None:
    if store_url.startswith("sqlite:///"):
        import sqlite3

        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        conn.execute(SQLITE_TRIGGER)
        conn.commit()
        conn.close()
        return
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as pg:
        for statement in PG_TRIGGER:
            pg.execute(statement)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/agents.db"
    return str(request.getfixturevalue("postgresql_url"))


@pytest.mark.parametrize("keep_open", [False, True])
def test_a_write_the_database_refuses_leaves_the_session_as_it_was(
    db_url: str, keep_open: bool
) -> None:
    async def main() -> None:
        session = DshSession("s", store=db_url, keep_open=keep_open)
        await session.add_items(ITEMS)
        _install_trigger(db_url)
        with pytest.raises(Exception, match="refused by trigger"):
            await session.add_items(POISON)
        assert _stored_items(db_url) == ITEMS
        assert await session.get_items() == ITEMS  # nothing of it in memory either
        assert session.store.get("s") is None or keep_open
        assert _locks._LOCKS == {}
        await session.add_items(ITEMS[:1])  # the next call writes only its own items
        assert await session.get_items() == [*ITEMS, ITEMS[0]]
        await session.aclose()

    asyncio.run(main())
    assert _stored_items(db_url) == [*ITEMS, ITEMS[0]]


FSIZE = textwrap.dedent("""
    import asyncio, json, os, resource, signal, sys
    from dsh_session_openai_agents import DshSession

    store_url, keep_open, items = sys.argv[1], sys.argv[2] == "1", json.loads(sys.argv[3])
    # Bigger than the limit leaves room for, compressed too (random text).
    poison = [{"role": "user", "content": "first"},
              {"role": "user", "content": os.urandom(100_000).hex()},
              {"role": "user", "content": "last"}]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG

    async def main():
        session = DshSession("s", store=store_url, keep_open=keep_open)
        await session.add_items(items)
        sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(sys.argv[4])
                 for f in fs]
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max(sizes) + 1000, hard))
        try:
            await session.add_items(poison)
            print("written")
        except OSError as exc:
            print("failed", exc.errno if exc.errno is not None else exc.__cause__.errno)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        print(json.dumps(await session.get_items() == items))
        await session.add_items(items[:1])
        print(json.dumps(await session.get_items() == [*items, items[0]]))
        await session.aclose()

    asyncio.run(main())
""")


@pytest.mark.parametrize("keep_open", [False, True])
@pytest.mark.parametrize("scheme", ["", "jsonl+zstd:"])
def test_a_write_past_the_file_size_limit_leaves_the_session_as_it_was(
    tmp_path: Path, keep_open: bool, scheme: str
) -> None:
    import json

    if scheme:
        pytest.importorskip("zstandard")
    folder = tmp_path / "logs"
    store_url = f"{scheme}{folder}"
    done = subprocess.run(
        [sys.executable, "-c", FSIZE, store_url, "1" if keep_open else "0", json.dumps(ITEMS),
         str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    import errno

    assert done.stdout.split("\n")[:3] == [f"failed {errno.EFBIG}", "true", "true"], (
        done.stdout, done.stderr)
    assert _stored_items(store_url) == [*ITEMS, ITEMS[0]]


@pytest.mark.parametrize("keep_open", [False, True])
def test_a_batch_the_mapping_refuses_stores_nothing_and_keeps_nothing(
    tmp_path: Path, keep_open: bool
) -> None:
    store_url = str(tmp_path / "logs")

    async def main() -> None:
        session = DshSession("s", store=store_url, keep_open=keep_open)
        await session.add_items(ITEMS)
        bad: Any = {"role": "user", "content": {1, 2}}
        with pytest.raises(Exception, match="JSON"):
            await session.add_items([ITEMS[0], bad])
        assert await session.get_items() == ITEMS
        assert _locks._LOCKS == {}
        await session.aclose()

    asyncio.run(main())
    assert _stored_items(store_url) == ITEMS


OTHER = textwrap.dedent("""
    import asyncio, json, sys
    from dsh_session_openai_agents import DshSession

    async def main():
        session = DshSession("s", store=sys.argv[1])
        await session.add_items(json.loads(sys.argv[2]))
        await session.aclose()

    asyncio.run(main())
""")


# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")

def test_the_default_mode_sees_another_processs_appends_between_its_calls(store_url: str) -> None:
    """The default mode keeps its session between calls, and takes it back at each
    one: what another process appended meanwhile is in it, and its own next items
    come after them."""
    import json

    async def main() -> None:
        session = DshSession("s", store=store_url)
        await session.add_items(ITEMS[:2])
        other = [{"role": "user", "content": "from another process"}]
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", OTHER, store_url, json.dumps(other)],
            capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
        await session.add_items(ITEMS[2:])
        assert await session.get_items() == [*ITEMS[:2], *other, *ITEMS[2:]]
        popped = await session.pop_item()
        assert popped == ITEMS[-1]
        await session.aclose()
        assert _stored_items(store_url) == [*ITEMS[:2], *other, *ITEMS[2:-1]]

    asyncio.run(main())


RACE = textwrap.dedent("""
    import asyncio, os, sys
    from dsh_session_openai_agents import DshSession

    async def main():
        session = DshSession("s", store=sys.argv[1])
        while not os.path.exists(sys.argv[2]):
            pass
        await session.add_items([{"role": "user", "content": sys.argv[3]}])
        await session.aclose()
        print("ok")

    asyncio.run(main())
""")


def test_two_processes_creating_one_new_session_both_write_it(
    store_url: str, tmp_path: Path
) -> None:
    done = at_once(RACE, store_url, tmp_path, ("from a", "from b"))
    assert [d.stdout for d in done] == ["ok\n", "ok\n"], done
    assert sorted(i["content"] for i in _stored_items(store_url)) == ["from a", "from b"]


# (The default mode reads without opening the session, so only keep_open's read opens.)
@pytest.mark.parametrize(("first", "keep_open"),
                         [("add_items", False), ("add_items", True), ("get_items", True)])
def test_a_session_created_between_our_look_and_our_create_is_opened(
    store_url: str, keep_open: bool, first: str
) -> None:
    """The interleaving the two-process race above hits only now and then, made
    certain: this store's first ``open`` finds nothing, and before it looks again
    another writer (another process) creates the session. Writing then
    adds to theirs; reading shows theirs; neither raises "not found"."""
    import json

    theirs: list[Any] = [{"role": "user", "content": "from the other writer"}]
    mine: list[Any] = [{"role": "user", "content": "from this writer"}]

    async def main() -> None:
        store = open_store(store_url)
        real_open, real_aopen = store.open, store.aopen
        raced = False

        def other_writer_creates() -> None:
            nonlocal raced
            if not raced:
                raced = True
                done = subprocess.run(
                    [sys.executable, "-c", OTHER, store_url, json.dumps(theirs)],
                    capture_output=True, text=True, check=False, timeout=120)
                assert done.returncode == 0, done.stderr

        def racing_open(session_id: str, **kw: Any) -> Any:
            try:
                return real_open(session_id, **kw)
            finally:
                other_writer_creates()

        async def racing_aopen(session_id: str, **kw: Any) -> Any:
            try:
                return await real_aopen(session_id, **kw)
            finally:
                await asyncio.to_thread(other_writer_creates)

        store.open, store.aopen = racing_open, racing_aopen  # type: ignore[method-assign]
        session = DshSession("s", store=store, keep_open=keep_open)
        if first == "add_items":
            await session.add_items(mine)
            assert await session.get_items() == [*theirs, *mine]
        else:
            assert await session.get_items() == theirs
        assert raced
        await session.aclose()
        store.close()
        assert _stored_items(store_url) == (
            [*theirs, *mine] if first == "add_items" else theirs)

    asyncio.run(main())


BACKEND_RACE = textwrap.dedent("""
    import os, sys
    from dsh_session_core import PersistenceError, SessionHeader, Session
    from dsh_session_core._persistence.opening import backend_for

    backend = backend_for(sys.argv[1])
    session = Session("s", header=SessionHeader(version=1, id="s", created_at=1))
    with session.turn() as turn:
        turn.user(sys.argv[3])
    events = list(session.events)
    while not os.path.exists(sys.argv[2]):
        pass
    try:
        backend.append_batch(session.header, events, session.jsonl(), False)
        print("created")
    except PersistenceError as exc:
        print("refused:", exc)
    backend.close()
""")


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql"])
def test_a_database_refuses_a_second_creation_with_a_persistence_error(
    scheme: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two processes write the first batch of one new session at once, through the
    backend (no writer lock): one creates it, the other is refused with a
    ``PersistenceError`` that says so (not the driver's integrity error)."""
    store_url = (f"sqlite:///{tmp_path}/agents.db" if scheme == "sqlite"
           else str(request.getfixturevalue("postgresql_url")))
    with open_store(store_url):
        pass  # the schema, made once
    done = at_once(BACKEND_RACE, store_url, tmp_path, ("a", "b"))
    said = sorted(d.stdout.strip() for d in done)
    assert said[0] == "created", done
    assert said[1].startswith("refused:"), done
    assert "another writer" in said[1], done


def test_the_table_of_turns_is_pruned_after_a_cancellation(tmp_path: Path) -> None:
    store_url = str(tmp_path / "logs")

    async def main() -> None:
        session = DshSession("s", store=store_url)
        other = DshSession("s", store=store_url)
        await session.add_items(ITEMS[:1])
        tasks = [asyncio.ensure_future(s.add_items(ITEMS[1:2])) for s in (session, other)]
        await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert _locks._LOCKS == {}
        assert len(await session.get_items()) in (1, 2, 3)
        await session.add_items(ITEMS[2:3])
        assert _locks._LOCKS == {}
        await session.aclose()
        await other.aclose()
        assert _locks._LOCKS == {}

    asyncio.run(main())


@pytest.mark.parametrize("keep_open", [False, True], ids=["default", "keep_open"])
def test_a_session_another_writer_creates_between_the_look_and_the_create_is_opened(
    store_url: str, keep_open: bool
) -> None:
    """The window two processes race through, made certain: the session is not stored
    when this instance looks, and another process creates and writes it before this
    instance's create runs. The store refuses that create (SessionExistsError); the
    instance opens the other writer's session and adds after its items."""
    import json

    theirs: list[Any] = [{"role": "user", "content": "from the other writer"}]
    mine: list[Any] = [{"role": "user", "content": "from this one"}]

    def other_process_adds() -> None:
        # Another process: one process's instances of a session take turns, so the
        # other writer of the race is always another process.
        done = subprocess.run([sys.executable, "-c", OTHER, store_url, json.dumps(theirs)],
                              capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr

    async def main() -> None:
        session = DshSession("s", store=store_url, keep_open=keep_open)
        store = session.store
        created: list[str] = []

        def create(sid: str, *args: Any, **kwargs: Any) -> Any:
            if not created:
                created.append(sid)
                other_process_adds()
            return type(store).create(store, sid, *args, **kwargs)

        async def acreate(sid: str, *args: Any, **kwargs: Any) -> Any:
            if not created:
                created.append(sid)
                await asyncio.to_thread(other_process_adds)
            return await type(store).acreate(store, sid, *args, **kwargs)

        store.create = create  # type: ignore[method-assign,assignment]
        store.acreate = acreate  # type: ignore[method-assign,assignment]
        await session.add_items(mine)
        assert created == ["s"]  # the window was taken
        assert await session.get_items() == [*theirs, *mine]
        await session.aclose()

    asyncio.run(main())
    assert _stored_items(store_url) == [*theirs, *mine]
