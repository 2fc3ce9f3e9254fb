"""The opt-in dev invariants: a listener-only plugin checking turn enclosure and provenance.

It checks them on every event of every store-registered session.

It is a development aid, not part of the log's contract: the core accepts any order of
events (core spec §12.21), and this plugin holds producers to the rules the durable log
relies on (turn/step enclosure and numbering, tool call/result pairing within a step,
``sourceEventSeqs`` provenance, replace ranges that record every node they shadow). It
is not an entry point, so installing dsh-session never turns it on; register it by hand::

    from dsh_session_core import SessionStore, create_plugin_manager
    from dsh_session_core.invariants import InvariantsPlugin

    pm = create_plugin_manager()
    pm.register(InvariantsPlugin())
    store = SessionStore(pm)

A violation raises :class:`~dsh_session_core.errors.InvariantError` (message
``invariant violated: <detail>``, ``code == "INVARIANT"``). On an append it comes out of
``Session.append`` *after* the event is in the log, as in the reference (the check is a
listener; core spec §12.1). On ``SessionStore.create`` (or ``fork``) it comes from the
replay of the seeded log, and the store rolls the registration back.

Deviations from the reference plugin (edc065666f):

- ``freeze`` is accepted and does nothing: logged events are immutable already.
- The reference replays every existing session when it is applied. A pluggy plugin
  registered on a manager cannot list the sessions of the stores built on it, so a
  session created before :class:`InvariantsPlugin` was registered is replayed lazily,
  just before its next event is checked; :meth:`InvariantsPlugin.watch` replays it at
  once (to learn now whether its log already breaks a rule).
- ``Session.append`` itself already refuses surface fields on non-surface types and
  replace ops that do not fit the surface, before logging. Those checks here therefore
  only fire for seeded (loaded) logs, whose events the core keeps as they were written.
- A violating event never enters the plugin's trace: the next event is judged against
  the state before it (the reference's later versions do the same).
- "Surface type" means a surface type of the session's registry (the five core types,
  plus any a plugin registers), not a fixed list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec
from msgspec import UNSET

from ._plugins.manager import hookimpl
from .errors import InvariantError
from .jscompat import UNDEFINED, strict_equals
from .jscompat import js_string as _js  # details render as the reference's template strings

if TYPE_CHECKING:
    from ._model.session import Session
    from .events import Event

__all__ = ["InvariantsPlugin"]


#: An absent field: JS ``undefined``, as opposed to JSON ``null`` (``None``).
_MISSING: Final = UNDEFINED

#: Types that must name the open turn and step (core spec §10 item 5).
_STEP_SCOPED: Final = frozenset(
    {"step/end", "assistant/chunk", "assistant/message", "tool/call", "tool/result"}
)


# --- reading typed and opaque events alike -------------------------------------------------


def _member(value: object, attr: str, key: str) -> object:
    """``value.<key>`` as the reference reads it off JSON: the Struct attribute ``attr``
    of a typed payload, or the key ``key`` of an opaque (read-only mapping) one."""
    if isinstance(value, msgspec.Struct):
        found = getattr(value, attr, _MISSING)
        return _MISSING if found is UNSET else found
    if isinstance(value, Mapping):
        return value.get(key, _MISSING)
    return _MISSING


def _envelope_field(event: Event, attr: str) -> object:
    # Typed non-surface events have no such attribute; opaque ones read their wire entry.
    found = getattr(event, attr, UNSET)
    return _MISSING if found is UNSET else found


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _key(value: object) -> object:
    """A hashable stand-in with JS ``Set`` (SameValueZero) membership semantics."""
    if isinstance(value, bool):
        return ("bool", value)
    if _is_number(value) or isinstance(value, str) or value is None:
        return value
    return ("object", id(value))


def _index(surface: list[int], seq: object) -> int:
    """``surface.indexOf(seq)``: the position of ``seq``, or -1."""
    for i, node in enumerate(surface):
        if strict_equals(node, seq):
            return i
    return -1


# --- the per-session trace -------------------------------------------------------------------


class _Trace:
    """What the plugin remembers of one session's log (the reference's ``SessionTrace``)."""

    __slots__ = (
        "known",
        "last_seq",
        "next_step",
        "next_turn",
        "open_step",
        "open_turn",
        "pending",
        "surface",
    )

    def __init__(self) -> None:
        self.last_seq = -1
        self.open_turn: object = None
        self.open_step: object = None
        self.next_turn = 1
        self.next_step = 1
        #: Call ids of the open step awaiting a result; cleared at ``step/end``.
        self.pending: set[object] = set()
        #: Every seq seen, to resolve ``sourceEventSeqs`` references.
        self.known: set[object] = set()
        #: The surface, head to tail, by seq (positions, not seq order, after a replace).
        self.surface: list[int] = []


class _Transition(NamedTuple):
    """One checked event's effect on a trace, applied only once every check passed."""

    seq: int
    open_turn: object
    open_step: object
    next_turn: int
    next_step: int
    #: ``("add" | "delete", call id)``, ``("clear", None)`` or ``None``.
    pending: tuple[str, object] | None
    #: ``"append"``, ``(position, count)`` of a replace, or ``None``.
    surface: str | tuple[int, int] | None


def _check_provenance(trace: _Trace, seq: int, seqs: object) -> None:
    if not isinstance(seqs, (tuple, list)):
        # The reference would crash on a non-array here; say what is wrong instead.
        msg = f"sourceEventSeqs must be a list of seqs when present, got {_js(seqs)}"
        raise InvariantError(msg)
    if not seqs:
        msg = "sourceEventSeqs must not be empty when present"
        raise InvariantError(msg)
    if len({_key(ref) for ref in seqs}) != len(seqs):
        msg = "sourceEventSeqs must not contain duplicates"
        raise InvariantError(msg)
    for ref in seqs:
        if _is_number(ref) and ref >= seq:
            msg = f"sourceEventSeqs must reference earlier events: {_js(ref)} >= current seq {seq}"
            raise InvariantError(msg)
        if _key(ref) not in trace.known:
            msg = f"sourceEventSeqs references unknown seq {_js(ref)}"
            raise InvariantError(msg)


def _check_replace(trace: _Trace, op: object, seqs: object) -> tuple[int, int]:
    start = _member(op, "start", "start")
    end = _member(op, "end", "end")
    i = _index(trace.surface, start)
    if i == -1:
        msg = f"surface replace: start seq {_js(start)} is not on the surface"
        raise InvariantError(msg)
    j = _index(trace.surface, end)
    if j == -1:
        msg = f"surface replace: end seq {_js(end)} is not on the surface"
        raise InvariantError(msg)
    if i > j:
        msg = (
            f"surface replace: start seq {_js(start)} (pos {i}) is after end seq {_js(end)} "
            f"(pos {j}) on the surface"
        )
        raise InvariantError(msg)
    # The provenance contract: the replacement records every node it shadows.
    recorded = {_key(s) for s in seqs} if isinstance(seqs, (tuple, list)) else set()
    missing = [s for s in trace.surface[i : j + 1] if _key(s) not in recorded]
    if missing:
        msg = (
            "surface replace: sourceEventSeqs must include every shadowed surface node; "
            f"missing {', '.join(_js(s) for s in missing)}"
        )
        raise InvariantError(msg)
    return i, j - i + 1


def _require_open_step(trace: _Trace, etype: str, turn: object, step: object) -> None:
    if not (strict_equals(trace.open_turn, turn) and strict_equals(trace.open_step, step)):
        msg = (
            f"{etype} names turn {_js(turn)}/step {_js(step)} but open is turn "
            f"{_js(trace.open_turn)}/step {_js(trace.open_step)}"
        )
        raise InvariantError(msg)


def _check(trace: _Trace, event: Event, surface_types: frozenset[str]) -> _Transition:
    """Check ``event`` against ``trace`` without changing it (core spec §10, in order).

    :raises InvariantError: the first rule ``event`` breaks.
    """
    seq = event.seq
    if seq <= trace.last_seq:
        msg = f"seq must strictly increase: saw {seq} after {trace.last_seq}"
        raise InvariantError(msg)
    etype = event.type
    seqs = _envelope_field(event, "source_event_seqs")
    op = _envelope_field(event, "surface_op")

    # 2-4: the surface fields.
    if etype not in surface_types:
        if seqs is not _MISSING:
            msg = f"{etype} cannot carry sourceEventSeqs (non-surface event)"
            raise InvariantError(msg)
        if op is not _MISSING:
            msg = f"{etype} cannot carry surfaceOp (non-surface event)"
            raise InvariantError(msg)
    if seqs is not _MISSING:
        _check_provenance(trace, seq, seqs)
    surface: str | tuple[int, int] | None = None
    if op is not _MISSING:
        surface = "append" if op == "append" else _check_replace(trace, op, seqs)

    # 5: turn and step enclosure, by type.
    data = event.data
    open_turn, open_step = trace.open_turn, trace.open_step
    next_turn, next_step = trace.next_turn, trace.next_step
    pending: tuple[str, object] | None = None
    turn = _member(data, "turn", "turn")
    step = _member(data, "step", "step")
    if etype == "turn/start":
        if trace.open_turn is not None:
            msg = f"turn/start {_js(turn)} while turn {_js(trace.open_turn)} is still open"
            raise InvariantError(msg)
        # Numbering starts at 1 with no gaps: this assumes the whole log is replayed.
        if not strict_equals(turn, trace.next_turn):
            msg = f"turn/start expected turn {trace.next_turn}, got {_js(turn)}"
            raise InvariantError(msg)
        open_turn, next_step = turn, 1
    elif etype == "turn/end":
        if not strict_equals(trace.open_turn, turn):
            msg = f"turn/end {_js(turn)} does not match open turn {_js(trace.open_turn)}"
            raise InvariantError(msg)
        if trace.open_step is not None:
            msg = f"turn/end {_js(turn)} while step {_js(trace.open_step)} is still open"
            raise InvariantError(msg)
        open_turn, next_turn = None, next_turn + 1
    elif etype == "step/start":
        if not strict_equals(trace.open_turn, turn):
            msg = f"step/start in turn {_js(turn)} but open turn is {_js(trace.open_turn)}"
            raise InvariantError(msg)
        if trace.open_step is not None:
            msg = f"step/start {_js(step)} while step {_js(trace.open_step)} is still open"
            raise InvariantError(msg)
        if not strict_equals(step, trace.next_step):
            msg = f"step/start expected step {trace.next_step} in turn {_js(turn)}, got {_js(step)}"
            raise InvariantError(msg)
        open_step = step
    elif etype in _STEP_SCOPED:
        _require_open_step(trace, etype, turn, step)
        if etype == "step/end":
            # A result must come in the step of its call: calls left open do not carry over.
            pending, open_step, next_step = ("clear", None), None, next_step + 1
        elif etype == "tool/call":
            pending = ("add", _member(data, "call_id", "callId"))
        elif etype == "tool/result":
            call_id = _member(data, "call_id", "callId")
            # Crash repair answers calls no tool/call event announced (core spec §7).
            synthetic = _truthy(_member(data, "is_error", "isError")) and strict_equals(
                _member(_member(data, "error", "error"), "code", "code"), "interrupted"
            )
            if _key(call_id) not in trace.pending and not synthetic:
                msg = f"tool/result for {_js(call_id)} with no prior tool/call in this step"
                raise InvariantError(msg)
            pending = ("delete", call_id)
    elif trace.open_turn is None:
        # Every other type, plugin types included: the durable log treats anything after
        # the last turn/end as a crash tail, so a bare event would be lost on reload.
        msg = f"{etype} appended outside any open turn (every event must be turn-enclosed)"
        raise InvariantError(msg)
    return _Transition(seq, open_turn, open_step, next_turn, next_step, pending, surface)


def _truthy(value: object) -> bool:
    """JS truthiness (objects and arrays are truthy even when empty)."""
    if value is _MISSING or value is None:
        return False
    if isinstance(value, (Mapping, tuple, list, msgspec.Struct)):
        return True
    return bool(value)


def _apply(trace: _Trace, t: _Transition) -> None:
    trace.last_seq = t.seq
    trace.open_turn, trace.open_step = t.open_turn, t.open_step
    trace.next_turn, trace.next_step = t.next_turn, t.next_step
    if t.pending is not None:
        action, call_id = t.pending
        if action == "add":
            trace.pending.add(_key(call_id))
        elif action == "delete":
            trace.pending.discard(_key(call_id))
        else:
            trace.pending.clear()
    if t.surface == "append":
        trace.surface.append(t.seq)
    elif isinstance(t.surface, tuple):
        at, count = t.surface
        trace.surface[at : at + count] = [t.seq]
    trace.known.add(_key(t.seq))


def _replay(trace: _Trace, events: Iterable[Event], surface_types: frozenset[str]) -> None:
    for event in events:
        _apply(trace, _check(trace, event, surface_types))


# --- the plugin --------------------------------------------------------------------------------


class InvariantsPlugin:
    """Checks every event of every session of the stores built on the manager it is
    registered on; one instance keeps one trace per session id.

    A trace belongs to one session object: when another session shows up under a known
    id (re-created after a detach, or a second store on the same manager minting the same
    id), its log is replayed and the new trace replaces the old one. Traces are never
    dropped (no hook says a session is gone), so keep this plugin to development runs.

    :param freeze: accepted for compatibility with the reference's option and ignored:
        logged events are immutable msgspec Structs with read-only JSON data already,
        so there is nothing left to freeze.
    """

    def __init__(self, freeze: bool = True) -> None:
        self.freeze = freeze
        # Keyed by id, holding the session too: a re-created id is a new log to replay.
        self._traces: dict[str, tuple[Session, _Trace]] = {}

    def watch(self, session: Session) -> None:
        """Replay ``session``'s whole log now and check every event from then on.

        For sessions that existed before this plugin was registered (no
        ``session_created`` reached it). Without it they are replayed just before their
        next event is checked; calling it surfaces a broken log at once. Replaying a
        session already watched starts its trace over.

        :param session: any session, store-registered or bare; only store-registered
            sessions report their later appends.
        :raises InvariantError: an event already in the log breaks a rule; the trace
            keeps the state before that event.
        """
        trace = _Trace()
        self._traces[session.id] = (session, trace)
        _replay(trace, session.events, session.registry.surface_types)

    @hookimpl
    def session_created(self, session: Session) -> None:
        """Replay a new session's seeded (or forked) log, which fires no ``session_event``.

        :param session: the session the store just created.
        :raises InvariantError: a seeded event breaks a rule; the store then rolls the
            registration back.
        """
        try:
            self.watch(session)
        except InvariantError:
            # The store detaches the session: keep nothing of it.
            self._traces.pop(session.id, None)
            raise

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        """Check one appended event against its session's trace, then record it.

        :param session: the session appended to.
        :param event: the logged event.
        :raises InvariantError: ``event`` breaks a rule; it stays in the log and the trace
            keeps the state before it.
        """
        entry = self._traces.get(session.id)
        if entry is None or entry[0] is not session:
            # Not seen through session_created: registered later, or an id re-created.
            # Replay the log before this event (later ones may already be queued behind it).
            trace = _Trace()
            self._traces[session.id] = (session, trace)
            _replay(trace, session.events[: event.seq], session.registry.surface_types)
        else:
            trace = entry[1]
        _apply(trace, _check(trace, event, session.registry.surface_types))

    def __repr__(self) -> str:
        return f"<InvariantsPlugin watching {len(self._traces)} sessions>"
