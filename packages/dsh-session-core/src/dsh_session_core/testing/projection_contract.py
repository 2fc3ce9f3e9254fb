"""The projection cases of the backend contract: what a store answers of a projection,
on any backend, with rows kept or not.

Mixed into :class:`~.contract.BackendContract`, so a third-party backend's suite runs
them too: where the backend keeps rows (the ``Projecting`` capability), they are read
back from it and must equal the log's fold; where it does not, the store folds the log
and the answers are the same. The expected answers come from a model of the fold
written here (:class:`_Model`), not from core's own fold.
"""

from __future__ import annotations

__all__ = ["ContractPlugin", "ProjectionContract", "contract_projection", "expected_rows"]

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from .. import Event, PersistencePlugin, core_registry, hookimpl
from .._persistence.capabilities import Capabilities
from .._persistence.projections.read import ProjectionView, open_view
from .._plugins.core_plugin import CORE_EVENT_SPECS
from .._schema.projections import Clear, Delete, Projection, Put, Summary
from .._schema.registry import EventRegistry
from .events import (
    assistant_data,
    session_header,
    step_data,
    turn_end_data,
    turn_start_data,
    user_data,
    wire_event,
)
from .stores import BackendFactory


class Text(msgspec.Struct, frozen=True):
    """A row of the contract's projection: a message's text."""

    text: str


class Last(msgspec.Struct, frozen=True):
    """Its summary row: the seq and text of the last user message."""

    seq: int
    text: str


def _fold(event: Event) -> Iterator[Any]:
    """User messages by seq; each turn's last assistant message; a step 2 drops its
    turn's answer; an interrupted turn clears every row."""
    data: Any = event.data
    if event.type == "user/message":
        text = data.content[0].text
        yield Put(f"u{event.seq:08d}", Text(text))
        yield Summary(Last(event.seq, text))
    elif event.type == "assistant/message":
        yield Put(f"a{data.turn:04d}", Text(data.content[0].text))
    elif event.type == "step/start" and data.step == 2:
        yield Delete(f"a{data.turn:04d}")
    elif event.type == "turn/end" and data.reason.kind == "interrupted":
        yield Clear()


#: The contract's projection, over core's event types only.
contract_projection = Projection(
    "contract/texts", 1,
    frozenset({"user/message", "assistant/message", "step/start", "turn/end"}),
    Text, _fold, summary=Last, doc="the contract's test projection")


def registry() -> EventRegistry:
    """Core's event types, and the contract's projection."""
    return EventRegistry((("core", s) for s in CORE_EVENT_SPECS), (),
                         [("contract", contract_projection)])


class ContractPlugin:
    """A plugin declaring :data:`contract_projection`, to register on a plugin manager
    (``pm.register(ContractPlugin(), "contract")``)."""

    @hookimpl
    def register_projections(self) -> list[Projection]:
        return [contract_projection]


def expected_rows(log: list[dict[str, Any]]) -> tuple[dict[str, str], tuple[int, str] | None]:
    """What :data:`contract_projection` holds of ``log`` (wire events, from seq 0), by
    :class:`_Model`: its rows' texts by key, and its summary's ``(seq, text)``."""
    model = _Model()
    for wire in log:
        model.see(wire)
    return model.rows, model.summary


class _Model:
    """The fold, written again as plain dict operations over wire events."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.summary: tuple[int, str] | None = None

    def see(self, wire: dict[str, Any]) -> None:
        kind, data, seq = wire["type"], wire["data"], wire["seq"]
        if kind == "user/message":
            self.rows[f"u{seq:08d}"] = data["content"][0]["text"]
            self.summary = (seq, data["content"][0]["text"])
        elif kind == "assistant/message":
            self.rows[f"a{data['turn']:04d}"] = data["content"][0]["text"]
        elif kind == "step/start" and data["step"] == 2:
            self.rows.pop(f"a{data['turn']:04d}", None)
        elif kind == "turn/end" and data["reason"]["kind"] == "interrupted":
            self.rows.clear()


def _turn(seq: int, turn: int, *, interrupted: bool = False, two_steps: bool = False,
          text: str = "") -> list[dict[str, Any]]:
    """One turn's wire events from ``seq`` on."""
    out = [wire_event("turn/start", seq, turn_start_data(turn)),
           wire_event("user/message", seq + 1, user_data(f"ask {turn}{text}"),
                      surface_op="append"),
           wire_event("step/start", seq + 2, step_data(turn, 1)),
           wire_event("assistant/message", seq + 3, assistant_data(turn, 1, f"answer {turn}"),
                      surface_op="append"),
           wire_event("step/end", seq + 4, step_data(turn, 1))]
    if two_steps:
        out += [wire_event("step/start", seq + 5, step_data(turn, 2)),
                wire_event("step/end", seq + 6, step_data(turn, 2))]
    reason = {"kind": "interrupted"} if interrupted else None
    out.append(wire_event("turn/end", seq + len(out), turn_end_data(turn, reason)))
    return out


def _log(*turns: dict[str, Any]) -> list[dict[str, Any]]:
    """Turns one after another (each ``_turn``'s keywords), numbered from 1."""
    out: list[dict[str, Any]] = []
    for number, kw in enumerate(turns, 1):
        out += _turn(len(out), number, **kw)
    return out


class ProjectionContract:
    """The projection cases (see the module); ``make_backend`` as the contract's."""

    def _coordinator(self, make_backend: BackendFactory) -> PersistencePlugin:
        return PersistencePlugin(make_backend(), registry())

    @pytest.fixture(autouse=True)
    def _readers(self) -> Iterator[None]:
        """The backends :meth:`_view` opens, closed once the test is done with its views
        (a view reads its rows when asked, not when opened)."""
        self._opened: list[Any] = []
        yield
        for backend in self._opened:
            backend.close()

    def _view(self, make_backend: BackendFactory, sid: str) -> ProjectionView[Any] | None:
        """The projection of ``sid`` read by a fresh backend (as another process)."""
        backend = make_backend()
        self._opened.append(backend)
        return open_view(Capabilities.of(backend), registry(), contract_projection, sid)

    @staticmethod
    def _rows(view: ProjectionView[Any] | None) -> dict[str, str]:
        assert view is not None
        return {k: v.text for k, v in view.rows()}

    def _write(self, make_backend: BackendFactory, sid: str, batches: list[list[Any]]
               ) -> _Model:
        p = self._coordinator(make_backend)
        p.create(session_header(sid))
        model = _Model()
        for batch in batches:
            p.append(sid, batch)
            for wire in batch:
                model.see(wire)
        p.close()
        return model

    def test_p1_rows_equal_the_fold(self, make_backend: BackendFactory) -> None:
        log = _log({}, {"two_steps": True}, {})
        model = self._write(make_backend, "p1", [log[:3], log[3:10], log[10:]])
        view = self._view(make_backend, "p1")
        assert self._rows(view) == model.rows
        assert view is not None
        assert view.covers == len(log)
        assert model.summary is not None
        assert view.summary() == Last(*model.summary)

    def test_p2_reads_by_key_range_and_newest_first(self, make_backend: BackendFactory
                                                     ) -> None:
        log = _log(*({} for _ in range(6)))
        model = self._write(make_backend, "p2", [log])
        view = self._view(make_backend, "p2")
        assert view is not None
        users = sorted(k for k in model.rows if k.startswith("u"))
        assert [k for k, _ in view.rows(prefix="u")] == users
        assert [k for k, _ in view.rows(prefix="u", newest_first=True, limit=2)] == \
            users[::-1][:2]
        assert [k for k, _ in view.rows(start=users[1], stop=users[4])] == users[1:4]
        assert view.get(users[2]) == Text(model.rows[users[2]])
        assert view.get("u99999999") is None
        assert view.get_many([users[0], "nope"]) == {users[0]: Text(model.rows[users[0]])}
        assert view.rows(limit=0) == []

    def test_p3_clear_and_delete_survive_a_reopen(self, make_backend: BackendFactory
                                                   ) -> None:
        log = _log({}, {"interrupted": True}, {"two_steps": True})
        model = self._write(make_backend, "p3", [log[:9], log[9:]])
        assert self._rows(self._view(make_backend, "p3")) == model.rows
        # The clear and the delete both held: the third turn's question alone is left.
        assert list(model.rows) == [f"u{log[-7]['seq']:08d}"]

    def test_p4_a_session_recreated_under_its_id_has_only_its_own_rows(
            self, make_backend: BackendFactory) -> None:
        from .._persistence.capabilities import capabilities_of

        self._write(make_backend, "p4", [_log({"text": " old"}, {})])
        backend = make_backend()
        deletable = capabilities_of(backend).deletable
        if deletable is None:
            backend.close()
            return  # a backend that cannot delete has no second life to test
        deletable.delete("p4")
        backend.close()
        assert self._view(make_backend, "p4") is None
        model = self._write(make_backend, "p4", [_turn(0, 1, text=" new")])
        assert self._rows(self._view(make_backend, "p4")) == model.rows

    def test_p5_rows_never_leak_between_sessions(self, make_backend: BackendFactory
                                                 ) -> None:
        a = self._write(make_backend, "p5-a", [_turn(0, 1, text=" a")])
        b = self._write(make_backend, "p5-b", [_log({"text": " b"}, {})])
        assert self._rows(self._view(make_backend, "p5-a")) == a.rows
        assert self._rows(self._view(make_backend, "p5-b")) == b.rows
        assert self._view(make_backend, "p5-c") is None

    def test_p6_a_log_appended_without_rows_is_folded_on_top(
            self, make_backend: BackendFactory) -> None:
        # A writer that knows no projection (an older release) appends after one that
        # kept rows: the rows are behind the log, and the answer still equals the fold.
        log = _log({}, {"two_steps": True}, {})
        model = self._write(make_backend, "p6", [log[:6]])
        plain = PersistencePlugin(make_backend(), core_registry())
        plain.append("p6", log[6:])
        plain.close()
        for wire in log[6:]:
            model.see(wire)
        view = self._view(make_backend, "p6")
        assert self._rows(view) == model.rows
        assert view is not None
        assert view.covers == len(log)
        assert model.summary is not None
        assert view.summary() == Last(*model.summary)
