"""A store's projections, end to end on the memory store (every other backend runs the
same cases in the backend contract, tests/persistence/test_contract.py): declaring
them, reading them, ``reindex``, rekey, and a fold that fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from dsh_session_core import (
    DurableStore,
    Event,
    Keyring,
    MemoryBackend,
    SealedBackend,
    create_plugin_manager,
    hookimpl,
    open_store,
)
from dsh_session_core._persistence.encryption.sealing import Sealer
from dsh_session_core.errors import PluginError, SessionNotStoredError, UnknownProjectionError
from dsh_session_core.projections import Projection, Put, Summary
from dsh_session_core.testing import user_turn


class Said(msgspec.Struct):
    text: str


class Count(msgspec.Struct):
    seq: int


def _fold(event: Event) -> Iterator[Any]:
    data: Any = event.data
    yield Put(f"{event.seq:08d}", Said(data.content[0].text))
    yield Summary(Count(event.seq))


SAID = Projection("test/said", 1, frozenset({"user/message"}), Said, _fold, summary=Count)


def _plugins(*projections: Projection) -> Any:
    class Plugin:
        @hookimpl
        def register_projections(self) -> list[Projection]:
            return list(projections)

    pm = create_plugin_manager()
    pm.register(Plugin(), "test-projections")
    return pm


def _write(store: Any, texts: list[str]) -> str:
    session = store.create()
    for turn, text in enumerate(texts, 1):
        user_turn(session, turn, text)
        store.flush(session)
    store.release(session)
    return str(session.id)


def test_rows_are_kept_and_read_without_folding_the_log() -> None:
    with open_store("memory:", plugin_manager=_plugins(SAID)) as store:
        sid = _write(store, ["a", "b", "c"])
        view = store.projection(sid, "test/said")
        assert view.folded == 0  # read from the rows the flushes kept
        assert [r.text for _, r in view.rows()] == ["a", "b", "c"]
        last = [e.seq for e in store.read(sid) if e.type == "user/message"][-1]
        assert view.summary() == Count(last)
        assert store.projection_summaries("test/said") == {sid: view.summary()}


def test_an_unknown_projection_or_session_is_refused_naming_it() -> None:
    with open_store("memory:", plugin_manager=_plugins(SAID)) as store:
        sid = _write(store, ["a"])
        with pytest.raises(UnknownProjectionError, match="test/nope") as caught:
            store.projection(sid, "test/nope")
        assert "test/said" in caught.value.known
        with pytest.raises(SessionNotStoredError):
            store.projection("missing", "test/said")


@pytest.mark.parametrize("bad", [
    "not a projection",
    Projection("nonamespace", 1, frozenset(), Said, _fold),
    Projection("test/v0", 0, frozenset(), Said, _fold),
    Projection("test/row", 1, frozenset(), dict, _fold),  # type: ignore[arg-type]
])
def test_a_bad_declaration_is_refused_naming_its_plugin(bad: Any) -> None:
    with pytest.raises(PluginError, match="test-projections"):
        open_store("memory:", plugin_manager=_plugins(bad))


def test_two_plugins_declaring_one_name_are_refused() -> None:
    pm = _plugins(SAID)

    class Other:
        @hookimpl
        def register_projections(self) -> list[Projection]:
            return [SAID]

    pm.register(Other(), "other")
    with pytest.raises(PluginError, match="two plugins"):
        open_store("memory:", plugin_manager=pm)


def test_a_fold_that_fails_loses_no_event_and_its_reads_say_why() -> None:
    def broken(event: Event) -> Iterator[Any]:
        raise RuntimeError("boom")

    bad = Projection("test/broken", 1, frozenset({"user/message"}), Said, broken)
    with open_store("memory:", plugin_manager=_plugins(bad, SAID)) as store:
        sid = _write(store, ["kept", "too"])
        assert [e.type for e in store.read(sid)].count("user/message") == 2
        assert [r.text for _, r in store.projection(sid, "test/said").rows()] == \
            ["kept", "too"]
        with pytest.raises(PluginError, match=r"test/broken.*boom"):
            store.projection(sid, "test/broken")


def test_reindex_rebuilds_rows_a_changed_fold_left_behind() -> None:
    backend = MemoryBackend()  # one storage, two stores: before and after an upgrade
    with DurableStore(backend, _plugins(SAID)) as before:
        sid = _write(before, ["x", "y"])

    def upper(event: Event) -> Iterator[Any]:
        data: Any = event.data
        yield Put(f"{event.seq:08d}", Said(data.content[0].text.upper()))

    # The same name and version, another fold (a plugin upgraded carelessly): the rows
    # kept are the old fold's until a reindex.
    changed = Projection("test/said", 1, frozenset({"user/message"}), Said, upper)
    with DurableStore(backend, _plugins(changed)) as store:
        assert [r.text for _, r in store.projection(sid, "test/said").rows()] == ["x", "y"]
        assert store.reindex() == {sid: ("test/said",)}
        assert [r.text for _, r in store.projection(sid, "test/said").rows()] == ["X", "Y"]


def test_a_rekey_seals_the_rows_anew() -> None:
    k1, k2 = b"1" * 32, b"2" * 32
    backend = MemoryBackend()

    def sealed(keys: Keyring) -> DurableStore:
        return DurableStore(SealedBackend(backend, Sealer(keys)), _plugins(SAID))

    with sealed(Keyring({"k1": k1})) as store:
        sid = _write(store, ["secret"])
    with sealed(Keyring({"k2": k2, "k1": k1})) as store:  # k2 seals from now on
        store.rekey(sid)
    with sealed(Keyring({"k2": k2})) as store:  # k1 dropped: the rows open with k2
        view = store.projection(sid, "test/said")
        assert view.folded == 0
        assert [r.text for _, r in view.rows()] == ["secret"]


def test_a_view_folding_a_tail_reads_the_rows_anew_once_a_writer_caught_them_up() -> None:
    # Rows behind the log (a writer without projections appended), a view opened on
    # them (the tail folded on top), then a writer catches the rows up and clears them:
    # the view's tail must not be laid over rows that already hold it.
    from dsh_session_core.testing import assistant, step_end, step_start, turn_end
    from dsh_session_core.testing.projection_contract import (
        ContractPlugin,
        contract_projection,
    )

    backend = MemoryBackend()

    def keeping() -> Any:
        pm = create_plugin_manager(autoload=False)
        pm.register(ContractPlugin(), "contract")
        return pm

    def turn(store: DurableStore, n: int, interrupted: bool = False) -> None:
        session = store.open("s") if store.stored() else store.create("s")
        user_turn(session, n, f"ask {n}", end=False)
        step_start(session, n, 1)
        assistant(session, n, 1, f"answer {n}")
        step_end(session, n, 1)
        turn_end(session, n, {"kind": "interrupted"} if interrupted else None)
        store.flush(session)
        store.release(session)

    with DurableStore(backend, keeping()) as store:
        turn(store, 1)
    with DurableStore(backend, create_plugin_manager(autoload=False)) as older:
        turn(older, 2)
    with DurableStore(backend, keeping()) as store:
        view = store.projection("s", contract_projection.name)
        assert view.folded > 0  # the second turn, folded on top of the rows
        turn(store, 3, interrupted=True)  # catches the rows up, then clears them all
        assert view.rows() == []


def test_a_key_no_backend_can_store_fails_its_projection_not_the_write() -> None:
    def surrogate(event: Event) -> Iterator[Any]:
        yield Put("\udc80", Said("x"))

    bad = Projection("test/surrogate", 1, frozenset({"user/message"}), Said, surrogate)
    with open_store("memory:", plugin_manager=_plugins(bad, SAID)) as store:
        sid = _write(store, ["kept"])
        assert [r.text for _, r in store.projection(sid, "test/said").rows()] == ["kept"]
        with pytest.raises(PluginError, match="no lone surrogate"):
            store.projection(sid, "test/surrogate")


@pytest.mark.store_kinds("sqlite", "postgresql", "jsonl", "redis")
def test_an_asyncio_flush_keeps_the_rows(store_url: str) -> None:
    import asyncio

    async def main() -> str:
        async with open_store(store_url, plugin_manager=_plugins(SAID)) as store:
            session = await store.acreate()
            for turn in (1, 2):
                user_turn(session, turn, f"said {turn}")
                await store.aflush(session)
            await store.arelease(session)
            view = await store.aprojection(session.id, "test/said")
            assert view.folded == 0  # the rows were written with each flush
            return str([r.text for _, r in view.rows()])

    assert asyncio.run(main()) == "['said 1', 'said 2']"


def test_a_session_stored_before_its_projection_gains_rows_at_its_first_open() -> None:
    backend = MemoryBackend()
    with DurableStore(backend, create_plugin_manager(autoload=False)) as before:
        sid = _write(before, ["old", "older"])  # no projection known: no rows
    with DurableStore(backend, _plugins(SAID)) as store:
        assert store.projection(sid, "test/said").folded > 0  # read by folding the log
        store.release(store.open(sid))  # a writer opens it, and writes nothing
        view = store.projection(sid, "test/said")
        assert view.folded == 0
        assert [r.text for _, r in view.rows()] == ["old", "older"]
