"""The coordinator's write path (spec plugins-persistence §8.4, scenarios 25-48): a store's
live sessions are buffered on append and written on flush, and newly created sessions
are bound to what is stored (the four adoption cases)."""

from __future__ import annotations

from typing import Any

import pytest
from persist_support import ONE_TURN, TE, TS, Factory, meta

from dsh_session_core import Session, create_plugin_manager, to_wire
from dsh_session_core._persistence.store.coordinator import PersistenceError, PersistencePlugin
from dsh_session_core._persistence.store.durable import DurableStore

USER = {"kind": "user"}


def store(storage: Factory) -> DurableStore:
    return DurableStore(storage(), create_plugin_manager(autoload=False), clock=lambda: 1)


def live_one_turn(s: Session) -> None:
    """Append ONE_TURN's six events through the live session."""
    for e in ONE_TURN:
        kw: dict[str, Any] = {"surface_op": e["surfaceOp"]} if "surfaceOp" in e else {}
        s.append(e["type"], e["data"], **kw)


def stored_seqs(storage: Factory, sid: str) -> list[int]:
    p = PersistencePlugin(storage(), store_registry())
    return [e.seq for e in p.load(sid).events]


def store_registry() -> Any:
    from dsh_session_core import core_registry

    return core_registry()


def test_s25_live_session_persisted(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("live", cwd="/w")
        live_one_turn(s)
        st.flush(s)
        loaded = st.persistence.load("live")
    assert len(loaded.events) == 6
    assert loaded.header.cwd == "/w"


def test_s26_seed_length_through_the_store(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("sl", cwd="/w", seed_length=3)
        live_one_turn(s)
        st.flush(s)
        assert st.persistence.load("sl").header.seed_length == 3


def test_s27_buffered_events_cannot_change(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("snap", cwd="/w")
        s.append("turn/start", TS(0, 1)["data"])
        ev = s.append("user/message", {"content": [{"type": "text", "text": "original"}],
                                       "source": USER}, surface_op="append")
        with pytest.raises(AttributeError):
            ev.data.content[0].text = "HACKED"
        s.append("turn/end", TE(2, 1)["data"])
        st.flush(s)
        assert to_wire(st.persistence.load("snap").events[1])["data"]["content"][0]["text"] == (
            "original")


def test_s28_fork_seed_persisted_once(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("forked", seed=ONE_TURN, cwd="/w")
        assert [to_wire(e) for e in st.persistence.load("forked").events] == ONE_TURN
        st.flush(s)
        assert len(st.persistence.load("forked").events) == 6


def test_s29_store_fork(storage: Factory) -> None:
    with store(storage) as st:
        parent = st.create("persist-parent", cwd="/workspace")
        parent.append("turn/start", TS(0, 1)["data"])
        parent.append("user/message", {"content": [{"type": "text", "text": "q"}],
                                       "source": USER}, surface_op="append")
        parent.append("turn/end", TE(2, 1)["data"])
        child = st.fork(parent, child_id="persist-child")
        st.flush(child)
        loaded = st.persistence.load("persist-child")
        assert [to_wire(e) for e in loaded.events] == [to_wire(e) for e in parent.events]
        h = to_wire(loaded.header)
        assert (h["id"], h["cwd"], h["parentSession"], h["seedLength"]) == (
            "persist-child", "/workspace", "persist-parent", 3)


def test_s30_resume(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("resumed", cwd="/w")
        live_one_turn(s)
        st.flush(s)
    with store(storage) as st:
        s = st.open("resumed")
        s.append("turn/start", TS(6, 2)["data"])
        s.append("turn/end", TE(7, 2)["data"])
        st.flush(s)
    assert stored_seqs(storage, "resumed") == list(range(8))


def test_s31_sessions_created_before_the_backend_is_mounted(storage: Factory) -> None:
    from dsh_session_core import SessionStore

    pm = create_plugin_manager(autoload=False)
    plain = SessionStore(pm)
    s = plain.create("hmr", cwd="/w")
    s.append("turn/start", TS(0, 1)["data"])
    s.append("turn/end", TE(1, 1)["data"])
    p = PersistencePlugin(storage(), plain.registry)
    pm.register(p, name="persistence")
    plain.flush(s)
    assert len(p.load("hmr").events) >= 2
    p.close()


def test_s32_close_drains(storage: Factory) -> None:
    st = store(storage)
    s = st.create("drain", cwd="/w")
    s.append("user/message", {"content": [{"type": "text", "text": "x"}], "source": USER},
             surface_op="append")
    s.append("turn/end", TE(1, 1)["data"])
    st.close()
    assert len(PersistencePlugin(storage(), store_registry()).load("drain").events) >= 2


def test_s36_collision_with_a_stored_log(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("collide", cwd="/w")
        live_one_turn(s)
        st.flush(s)
    # The store's create of a stored id: the id exists (a PersistenceError still).
    with store(storage) as st, pytest.raises(
        PersistenceError, match=r'^session "collide" already exists in this store: '
    ):
        st.create("collide", cwd="/w")


def test_s37_abandoned_id_reclaimed(storage: Factory) -> None:
    with store(storage) as st:
        with st.scope():
            st.create("abandoned", cwd="/w")
        s = st.create("abandoned", cwd="/w")
        s.append("turn/start", TS(0, 1)["data"])
        s.append("turn/end", TE(1, 1)["data"])
        st.flush(s)
        assert [e.seq for e in st.persistence.load("abandoned").events] == [0, 1]


def test_s38_not_reclaimed_with_buffered_events(storage: Factory) -> None:
    with store(storage) as st:
        with st.scope():
            first = st.create("buffered", cwd="/w")
            first.append("turn/start", TS(0, 1)["data"])
            first.append("turn/end", TE(1, 1)["data"])
        with pytest.raises(PersistenceError, match=r'^session "buffered" is already bound to a '
                                                   r"different live session in this backend "
                                                   r"\(id collision\)$"):
            st.create("buffered", cwd="/w")


def test_s39_idempotent_init(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("idem", cwd="/w")
        s.append("turn/start", TS(0, 1)["data"])
        s.append("turn/end", TE(1, 1)["data"])
        st.flush(s)
        st.announce(s)  # re-announcing the same live session writes nothing twice
        st.flush(s)
        assert len(st.persistence.load("idem").events) == 2


def test_s40_claim_a_cursor_0_ownerless_state(storage: Factory) -> None:
    with store(storage) as st:
        st.persistence.create(meta("lazy-claim", "/w"))
        st.create("lazy-claim", seed=ONE_TURN, cwd="/w")
        assert [e.seq for e in st.persistence.load("lazy-claim").events] == list(range(6))


def test_s41_ownerless_guard(storage: Factory) -> None:
    with store(storage) as st:
        st.persistence.create(meta("preview", "/w"))
        st.persistence.append("preview", ONE_TURN)
        st.persistence.load("preview")
        with pytest.raises(PersistenceError, match=r'^session "preview" is already persisted '
                                                   r"with 6 event\(s\) that do not match this "
                                                   r"live session \(id collision\)$"):
            st.create("preview", cwd="/w")


def test_s42_claim_with_a_matching_seed(storage: Factory) -> None:
    with store(storage) as st:
        st.persistence.create(meta("claim", "/w"))
        st.persistence.append("claim", ONE_TURN)
        loaded = st.persistence.load("claim").events
        st.create("claim", cwd="/w", seed=[*loaded, TS(6, 2, time=7), TE(7, 2, time=8)])
        assert [e.seq for e in st.persistence.load("claim").events] == list(range(8))


def test_s43_claim_blocked_by_cwd(storage: Factory) -> None:
    with store(storage) as st:
        st.persistence.create(meta("wrong-cwd-claim", "/other"))
        with pytest.raises(PersistenceError, match=r"already persisted at a different cwd "
                                                   r"\(persisted: /other, live: /w\)"):
            st.create("wrong-cwd-claim", cwd="/w", seed=ONE_TURN)
        st.persistence.create(meta("no-cwd-claim"))
        with pytest.raises(PersistenceError, match=r"\(persisted: undefined, live: /w\)"):
            st.create("no-cwd-claim", cwd="/w", seed=ONE_TURN)


def test_s44_tampered_seed(storage: Factory) -> None:
    with store(storage) as st:
        st.persistence.create(meta("divergent", "/a"))
        st.persistence.append("divergent", ONE_TURN)
        st.persistence.load("divergent")
        tampered = [dict(e) for e in ONE_TURN]
        tampered[1] = {**tampered[1], "data": {"content": [{"type": "text", "text": "DIFFERENT"}],
                                               "source": USER}}
        with pytest.raises(PersistenceError, match="do not match this live session"):
            st.create("divergent", cwd="/a", seed=tampered)


def test_s45_flush_right_after_create(storage: Factory) -> None:
    with store(storage) as st:
        s = st.create("flush-nostate", cwd="/w")
        s.append("turn/start", TS(0, 1)["data"])
        s.append("turn/end", TE(1, 1)["data"])
        st.flush(s)
        assert len(st.persistence.load("flush-nostate").events) == 2


class _FailingOnce:
    """Wraps a backend; its first ``append_batch`` raises ``disk full``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.fail = True

    def append_batch(self, *args: Any) -> None:
        if self.fail:
            self.fail = False
            raise OSError(28, "disk full")
        self.inner.append_batch(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_s46_a_failed_flush_keeps_the_buffer(storage: Factory) -> None:
    backend = _FailingOnce(storage())
    st = DurableStore(backend, create_plugin_manager(autoload=False))
    s = st.create("fails", cwd="/w")
    s.append("turn/start", TS(0, 1)["data"])
    s.append("turn/end", TE(1, 1)["data"])
    with pytest.raises(OSError, match="disk full"):
        st.flush(s)
    st.flush(s)
    assert [e.seq for e in st.persistence.load("fails").events] == [0, 1]
    st.close()


def test_s48_close_failures_are_aggregated(storage: Factory) -> None:
    backend = _FailingOnce(storage())
    st = DurableStore(backend, create_plugin_manager(autoload=False))
    s = st.create("agg", cwd="/w")
    s.append("turn/start", TS(0, 1)["data"])
    with pytest.raises(ExceptionGroup, match=f"^{backend.name} dispose failed") as info:
        st.close()
    assert info.value.exceptions[0].args[1] == "disk full"


def test_a_released_session_can_be_written_by_another_store(storage: Factory) -> None:
    first, second = store(storage), store(storage)
    s = first.create("handover", cwd="/w")
    s.append("turn/start", TS(0, 1)["data"])
    s.append("turn/end", TE(1, 1)["data"])
    first.release(s)  # flushed, and the writer lock is free
    assert first.get("handover") is None
    taken = second.open("handover")
    taken.append("turn/start", TS(2, 2)["data"])
    taken.append("turn/end", TE(3, 2)["data"])
    second.close()
    first.close()
    assert stored_seqs(storage, "handover") == [0, 1, 2, 3]


def test_location_names_where_a_session_lives(storage: Factory) -> None:
    import os

    with store(storage) as st:
        s = st.create("located", cwd="/w")
        s.append("turn/start", TS(0, 1)["data"])
        st.flush(s)
        live = st.location("located")
        st.release(s)
        assert st.location("located") == live  # found among the stored sessions too
        with pytest.raises(PersistenceError, match='session "nowhere" not found'):
            st.location("nowhere")
    if live.startswith(("postgresql://", "redis://")):  # the server's URL, no password
        assert ":" not in live.partition("://")[2].rpartition("@")[0]
    elif live != "memory:":
        assert os.path.isfile(live)
        if live.endswith(".jsonl"):
            assert os.path.basename(live) == "located.jsonl"
            with open(live, "rb") as f:
                assert b'"id":"located"' in f.readline()


def test_minted_ids_are_uuids_so_processes_do_not_collide(storage: Factory) -> None:
    import uuid

    with store(storage) as st:
        first, second = st.create(), st.create()
    assert uuid.UUID(first.id) != uuid.UUID(second.id)
