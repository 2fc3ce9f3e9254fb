"""The persistence contract: what every backend must satisfy, as a suite to run.

A suite a backend's own tests run (spec plugins-persistence §8.2, scenarios 1-24).

Subclass :class:`BackendContract` in a test module (its name must start with ``Test``
for pytest to collect it) and override its ``make_backend`` fixture: a callable that
opens a fresh instance of your backend over the storage of one test, as a second process
would (the same sessions each time)::

    import pytest
    from dsh_session_core.testing.contract import BackendContract

    class TestMyBackend(BackendContract):
        @pytest.fixture
        def make_backend(self, tmp_path):
            return lambda: MyBackend(tmp_path / "data")

Every case drives the backend through :class:`~dsh_session_core.PersistencePlugin`, the
write-behind coordinator every store puts in front of its backend. The projection cases
(``test_p*``, :mod:`.projection_contract`) hold whether the backend keeps projection rows
or not. Importing this module imports pytest.
"""

from __future__ import annotations

__all__ = ["BackendContract"]

import copy
from typing import Any

import pytest

from .. import PersistenceError, PersistencePlugin, core_registry, to_wire
from ..errors import SessionNotStoredError
from .events import (
    one_turn_log,
    session_header,
    step_data,
    turn_end_data,
    turn_start_data,
    wire_event,
)
from .projection_contract import ProjectionContract
from .stores import BackendFactory

ONE_TURN = one_turn_log()


def _ts(seq: int, turn: int, time: int | None = None) -> dict[str, Any]:
    return wire_event("turn/start", seq, turn_start_data(turn), time=time)


def _te(seq: int, turn: int, time: int | None = None) -> dict[str, Any]:
    return wire_event("turn/end", seq, turn_end_data(turn), time=time)


def _wire(events: Any) -> list[Any]:
    return [to_wire(e) for e in events]


def _ids(p: PersistencePlugin) -> set[str]:
    return {h.id for h in p.list()}


class _Cyclic(dict[str, Any]):
    pass


def _cycle() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["self"] = d
    return d


def _open_turn_2() -> list[dict[str, Any]]:
    return [_ts(6, 2, time=7), wire_event("step/start", 7, step_data(2, 1), time=8)]


def _orphan_call() -> list[dict[str, Any]]:
    return [_ts(6, 2), wire_event("step/start", 7, step_data(2, 1), time=8),
            {"type": "assistant/message", "seq": 8, "time": 9,
             "data": {"turn": 2, "step": 1, "content": [
                 {"type": "tool-call", "id": "call-x", "name": "bash", "arguments": "{}"}]},
             "surfaceOp": "append"}]


INTERRUPTED_RESULT = {
    "turn": 2, "step": 1, "callId": "call-x",
    "content": [{"type": "text",
                 "text": "Tool call interrupted by a crash; no result was recorded."}],
    "isError": True, "error": {"name": "InterruptedError", "code": "interrupted"},
}


class BackendContract(ProjectionContract):
    """The contract's cases, for a subclass to run on its backend (see the module).

    Besides ``make_backend``, a subclass may override ``keeps_line_order``: whether the
    backend gives back each event's log line as it was written (``True``, the default:
    a file of lines, or columns with the lines they would not give back kept beside
    them, as the SQLite and PostgreSQL backends do), or rebuilds every line from columns
    in the canonical key order (``False``, as the reference's SQLite backend does).
    """

    @pytest.fixture
    def make_backend(self) -> BackendFactory:
        """Override: a callable opening a fresh backend over this test's storage."""
        msg = f"{type(self).__name__} must override the make_backend fixture"
        raise NotImplementedError(msg)

    @pytest.fixture
    def keeps_line_order(self) -> bool:
        """Override with ``False`` for a backend that rebuilds its log lines."""
        return True

    def coordinator(self, make_backend: BackendFactory) -> PersistencePlugin:
        return PersistencePlugin(make_backend(), core_registry())

    def test_s1_round_trip(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s1", "/work"))
        p.append("s1", ONE_TURN)
        loaded = p.load("s1")
        assert to_wire(loaded.header) == {"type": "session", "version": 0, "id": "s1",
                                          "createdAt": 1000, "cwd": "/work"}
        assert _wire(loaded.events) == ONE_TURN

    def test_s2_s3_lazy_create_then_materialize(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("empty"))
        assert "empty" not in _ids(p)
        p.append("empty", ONE_TURN)
        assert "empty" in _ids(p)

    def test_s4_s5_empty_batches(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("eb", "/w"))
        p.append("eb", [])
        assert "eb" not in _ids(p)
        p.append("never-created", [])  # no adoption, no error

    def test_s6_re_append_rejected(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s1", "/work"))
        p.append("s1", ONE_TURN)
        with pytest.raises(PersistenceError, match=r'^append seq mismatch for "s1": expected 6 at '
                                                   r"index 0, got 0$"):
            p.append("s1", ONE_TURN)
        assert len(p.load("s1").events) == 6

    def test_s7_mid_batch_gap_stores_nothing(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s4"))
        step = {"type": "step/start", "seq": 2, "time": 2, "data": {"turn": 1, "step": 1}}
        with pytest.raises(PersistenceError, match=r'expected 1 at index 1, got 2'):
            p.append("s4", [_ts(0, 1), step])
        assert "s4" not in _ids(p)

    @pytest.mark.parametrize("bad", [set(), lambda: 0, object(), float("inf"), float("nan"),
                                     {1: "x"}, _cycle(), (1, 2)],
                             ids=["set", "lambda", "object", "inf", "nan", "int-key", "cycle",
                                  "tuple"])
    def test_s8_non_serializable_data(self, make_backend: BackendFactory, bad: Any) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s5"))
        event = {"type": "user/message", "seq": 0, "time": 1,
                 "data": {"content": [{"type": "text", "text": "x"}], "source": {"kind": "user"},
                          "extra": bad}}
        with pytest.raises(PersistenceError, match=r'^event "user/message" carries '
                                                   r"non-JSON-serializable data \(seq 0\)$"):
            p.append("s5", [event])
        assert "s5" not in _ids(p)

    def test_s9_accepted_json(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s9"))
        event = {"type": "user/message", "seq": 0, "time": 1,
                 "data": {"content": [{"type": "text", "text": "x"}], "source": {"kind": "user"},
                          "extra": {"a": None, "b": True, "c": [1, 2, {"d": "nested"}]}},
                 "surfaceOp": "append"}
        p.append("s9", [event])
        assert "s9" in _ids(p)
        assert _wire(p.load("s9").events)[0] == event

    def test_s10_append_snapshots_at_call_time(self, make_backend: BackendFactory) -> None:
        # Python calls return once durable; the snapshot rule shows as: later changes to
        # the caller's list and dicts never reach the store.
        batch = copy.deepcopy(ONE_TURN)
        p = self.coordinator(make_backend)
        p.create(session_header("snapshot"))
        p.append("snapshot", batch)
        batch.append(_ts(6, 2))
        batch[1]["data"]["content"] = [{"type": "text", "text": "MUTATED"}]
        loaded = _wire(p.load("snapshot").events)
        assert [e["seq"] for e in loaded] == [0, 1, 2, 3, 4, 5]
        assert loaded[1]["data"]["content"][0]["text"] == "hi"

    def test_s12_duplicate_create_in_memory(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("dup", "/w"))
        with pytest.raises(PersistenceError,
                           match=r'^session "dup" already exists in this backend$'):
            p.create(session_header("dup", "/w"))

    def test_s13_duplicate_create_against_storage(self, make_backend: BackendFactory) -> None:
        a = self.coordinator(make_backend)
        a.create(session_header("dup", "/w"))
        a.append("dup", ONE_TURN)
        a.close()
        b = self.coordinator(make_backend)
        with pytest.raises(PersistenceError, match=r'^session "dup" already has a persisted log on '
                                                   r"disk; load/resume it instead of creating$"):
            b.create(session_header("dup", "/w"))

    def test_s14_load_missing(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        # Its type (a PersistenceError) is what code tests; its message is the
        # reference's (what to do is its note, which pytest's ``match`` reads too).
        with pytest.raises(SessionNotStoredError) as caught:
            p.load("nope")
        assert (caught.value.session_id, str(caught.value)) == (
            "nope", 'session "nope" not found')
        p.create(session_header("nope"))
        with pytest.raises(PersistenceError, match="not found"):
            p.load("nope")

    def test_s15_unknown_version(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("v99", "/w", version=99, created_at=1))
        p.append("v99", ONE_TURN)
        assert {h.id: h.version for h in p.list()}["v99"] == 99
        with pytest.raises(PersistenceError, match=r'^unsupported session format version 99 for '
                                                   r'"v99" \(only v0 is supported\)$'):
            p.load("v99")

    def test_s16_lineage(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("forked-child", "/w", created_at=1, parent_session="the-parent",
                      seed_length=3))
        p.append("forked-child", ONE_TURN)
        header = p.load("forked-child").header
        assert (header.parent_session, header.seed_length) == ("the-parent", 3)

    def test_s17_s18_interrupted_turn_closed_durably(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s17"))
        p.append("s17", ONE_TURN)
        p.append("s17", _open_turn_2())
        loaded = _wire(p.load("s17").events)
        assert [e["type"] for e in loaded] == [
            "turn/start", "user/message", "step/start", "assistant/message", "step/end",
            "turn/end", "turn/start", "step/start", "step/end", "turn/end"]
        assert [e["seq"] for e in loaded] == list(range(10))
        assert loaded[8] == {"type": "step/end", "seq": 8, "time": 8,
                             "data": {"turn": 2, "step": 1}}
        assert loaded[9] == {"type": "turn/end", "seq": 9, "time": 8,
                             "data": {"turn": 2, "reason": {"kind": "interrupted"}}}
        # 18: the closers are stored, not synthesized again.
        p.append("s17", [_ts(10, 3), _te(11, 3)])
        assert [e.seq for e in p.load("s17").events] == list(range(12))
        p.close()
        assert len(self.coordinator(make_backend).load("s17").events) == 12

    def test_s19_orphaned_tool_call(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s19"))
        p.append("s19", [*ONE_TURN, *_orphan_call()])
        tail = _wire(p.load("s19").events)[9:]
        assert tail[0] == {"type": "tool/result", "seq": 9, "time": 9, "data": INTERRUPTED_RESULT,
                           "surfaceOp": "append"}
        assert [(e["type"], e["seq"], e["time"]) for e in tail[1:]] == [
            ("step/end", 10, 9), ("turn/end", 11, 9)]

    def test_s20_orphaned_call_with_its_tool_call_event(
        self, make_backend: BackendFactory, keeps_line_order: bool
    ) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s20"))
        call = {"type": "tool/call", "seq": 9, "time": 10,
                "data": {"turn": 2, "step": 1, "callId": "call-x", "name": "bash",
                         "arguments": "{}"}}
        p.append("s20", [*ONE_TURN, *_orphan_call(), call])
        tail = _wire(p.load("s20").events)[10:]
        assert tail[0] == {"type": "tool/result", "seq": 10, "time": 10, "data": INTERRUPTED_RESULT,
                           "surfaceOp": "append", "sourceEventSeqs": [9]}
        assert list(tail[0]) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
        assert [(e["type"], e["seq"], e["time"]) for e in tail[1:]] == [
            ("step/end", 11, 10), ("turn/end", 12, 10)]
        # Stored, the closer keeps its key order where the backend keeps the lines; a
        # backend that rebuilds lines from columns (the reference's SQLite backend)
        # gives the canonical order.
        p.close()
        fresh = self.coordinator(make_backend)
        again = fresh.load("s20").events[10]
        order = ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
        if not keeps_line_order:
            order = ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
        assert list(to_wire(again)) == order

    def test_s21_balanced_log_needs_no_repair(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("s1", "/work"))
        p.append("s1", ONE_TURN)
        assert len(p.load("s1").events) == 6
        assert len(p.load("s1").events) == 6

    def test_s22_all_tail_session(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("tail"))
        bare = {"type": "user/message", "seq": 1, "time": 2,
                "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}}
        p.append("tail", [_ts(0, 1), bare])  # no surfaceOp: persistence does not check it
        assert [e.type for e in p.load("tail").events] == ["turn/start", "user/message", "turn/end"]
        assert "tail" in _ids(p)

    def test_s23_adopt_on_append(self, make_backend: BackendFactory) -> None:
        a = self.coordinator(make_backend)
        a.create(session_header("adopt-append", "/w"))
        a.append("adopt-append", ONE_TURN)
        a.close()
        b = self.coordinator(make_backend)
        b.append("adopt-append", [_ts(6, 2), _te(7, 2)])
        assert [e.seq for e in b.load("adopt-append").events] == list(range(8))

    def test_s24_load_result_isolation(self, make_backend: BackendFactory) -> None:
        p = self.coordinator(make_backend)
        p.create(session_header("meta-copy", "/proj"))
        p.append("meta-copy", ONE_TURN)
        loaded = p.load("meta-copy")
        with pytest.raises(AttributeError):
            loaded.header.cwd = "/evil"  # type: ignore[misc]  # headers are immutable
        p.append("meta-copy", [_ts(6, 2), _te(7, 2)])
        again = p.load("meta-copy")
        assert again.header.cwd == "/proj"
        assert [e.seq for e in again.events] == list(range(8))
