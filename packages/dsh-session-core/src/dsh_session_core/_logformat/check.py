"""Checking a whole log as every loader checks it (``dsh-session validate``).

The schema checks of :func:`.validate.check_events`, and the rules seeding a session
applies (each seq its index, an integer; a well-formed surface op; event objects only)
and reading its surface applies (replace ops that fit). With ``strict``, also a tool call
no ``tool/result`` answers (:mod:`.unanswered`): the log loads, but a provider refuses the
request it derives.

Apart from :mod:`.validate` because the surface fold seeds a :class:`~.session.Session`,
and the session imports :mod:`.validate` for its schema checks.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import UNSET

from .._base.json_values import JsonObject
from .._schema.registry import EventRegistry
from .._schema.validate import Problem, check_events
from ..events import Event, OpaqueEvent

__all__ = ["check_log"]


def _shown(value: object) -> str:
    """A wire value as JSON text, for a message (``undefined`` when absent)."""
    from ..jscompat import UNDEFINED, json_stringify

    if value is UNDEFINED:
        return "undefined"
    try:
        return json_stringify(value)
    except (NotImplementedError, TypeError, ValueError):
        return repr(value)


def _structure_problem(
    ev: Event, index: int, registry: EventRegistry
) -> tuple[str, str] | None:
    """What a loader refuses in an event's envelope, apart from its schema: a line that
    is no event object, a seq that is no integer, a missing surface op or one of the
    wrong shape (typed events were checked when decoded)."""
    from ..jscompat import UNDEFINED

    if type(ev) is not OpaqueEvent:
        if ev.surface and ev.surface_op is UNSET:  # type: ignore[attr-defined]
            return "$.surfaceOp", "it is surface-eligible but carries no surfaceOp marker"
        return None
    wire = ev.wire
    if list(wire) == [""] and not isinstance(wire[""], JsonObject):
        kind = "array" if isinstance(wire[""], tuple) else "value"
        return "$", f"the line is a JSON {kind} ({_shown(wire[''])}), not an event object"
    seq = wire.get("seq", UNDEFINED)
    if type(seq) is not int:
        return "$.seq", f"seq is {_shown(seq)}, not an integer (expected {index})"
    surface = ev.type in registry.surface_types
    op = wire.get("surfaceOp", UNDEFINED)
    if surface and op is UNDEFINED:
        return "$.surfaceOp", "it is surface-eligible but carries no surfaceOp marker"
    if surface and op != "append" and not (
        isinstance(op, JsonObject)
        and op.get("op") == "replace"
        and type(op.get("start")) is int
        and type(op.get("end")) is int
    ):
        return ("$.surfaceOp", f'surfaceOp is {_shown(op)}, not "append" or '
                               f'{{"op":"replace","start":SEQ,"end":SEQ}}')
    return None


def _fold_problem(events: list[Event], registry: EventRegistry) -> Problem | None:
    """What reading the surface (``derive``) refuses in a log whose envelopes are fine:
    a replace op naming no live surface node, or nodes out of order."""
    from .._model.session import Session
    from ..errors import DshSessionError, SurfaceError

    try:
        Session("validate", events, registry=registry).derive_messages()
    except SurfaceError as exc:
        ev = events[exc.seq] if 0 <= exc.seq < len(events) else None
        etype = ev.type if ev is not None else "?"
        entry = registry.get(etype)
        return Problem(exc.seq, etype, entry.plugin if entry else None, "$.surfaceOp",
                       str(exc))
    except DshSessionError as exc:
        seq = getattr(exc, "seq", getattr(exc, "index", None))
        return Problem(seq, type(exc).__name__, None, "$", str(exc))
    return None


def check_log(
    events: Iterable[Event], registry: EventRegistry, *, strict: bool = False
) -> list[Problem]:
    """Every problem of a whole log that any loader refuses: :func:`check_events`'s,
    and a seq that is not its index (only the first: the later ones slip with it), a
    missing or malformed surface op, a line that is no event object, a replace op that
    does not fit the surface. A log with no problem here seeds a
    session and derives."""
    events = list(events)
    problems: list[Problem] = []
    bad: set[int] = set()
    misplaced = False
    for index, ev in enumerate(events):
        shape = _structure_problem(ev, index, registry)
        etype = ev.type if type(ev.type) is str and ev.type else "(no type)"
        entry = registry.get(etype)
        plugin = entry.plugin if entry else None
        if shape is not None:
            seq = ev.seq if type(ev.seq) is int else index
            problems.append(Problem(seq, etype, plugin, shape[0], shape[1]))
            bad.add(index)
            misplaced = True
        elif ev.seq != index and not misplaced:
            problems.append(Problem(
                ev.seq, etype, plugin, "$.seq",
                f"has seq {ev.seq} (expected {index}): seqs run 0, 1, 2... with no gap "
                f"or repeat"))
            misplaced = True
    fine = [ev for i, ev in enumerate(events) if i not in bad]
    problems.extend(check_events(fine, registry, strict=strict))
    if not problems:
        fold = _fold_problem(events, registry)
        if fold is not None:
            problems.append(fold)
    if strict:
        problems.extend(_unanswered_problems(events))
    return problems


def _unanswered_problems(events: list[Event]) -> list[Problem]:
    """One problem per tool call no ``tool/result`` answers, at its ``tool/call`` (or the
    message that made it), naming its id and tool."""
    from .._model.unanswered import unanswered_calls

    problems = []
    for call in unanswered_calls(events):
        etype = "tool/call" if call.message_seq != call.seq else "assistant/message"
        path = "$.data.callId" if etype == "tool/call" else "$.data.content"
        problems.append(Problem(call.seq, etype, None, path, call.describe(where=False)))
    return problems
