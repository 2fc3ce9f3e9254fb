"""The request header (spec §8): its canonical form, its deltas, its fold, and its guard.

Its canonical form, the line and tool deltas, the fold over ``request/header`` /
``request/header-delta`` events, the incremental fold a session owns, and the writer's
round-trip guard.

Everything here works on the *wire shape* of a header, the camelCase JSON object the log
holds (``{"config": {...}, "system": "...", "tools": [...], "messagePrefix": [...]}``),
because the reference compares tool schemas and prefixes by their JSON text, which is
sensitive to key order. Arrays may be lists or tuples (frozen or thawed log data); the
results this module builds use lists.

``tools`` may also be a string: the reference's snapshot recorder writes the placeholder
``"{{tools}}"`` there. It is kept like any non-empty value and compared by JSON text; the
tool delta treats it as no tools (the reference would raise a ``TypeError`` instead), and
:func:`record_request_header` never logs a tools delta against it, so every log written
here stays foldable by the reference.
"""

from __future__ import annotations

__all__ = [
    "HeaderLog",
    "RequestHeaderFold",
    "RequestHeaderWriter",
    "apply_header_delta",
    "apply_system",
    "apply_tools",
    "call_config_equals",
    "canonical_header",
    "diff_header",
    "diff_system",
    "diff_tools",
    "fold_request_header",
    "header_equals",
    "record_request_header",
]

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from .._base.json_values import JsonObject, enc_hook, freeze, thaw
from ..errors import RequestHeaderError
from ..events import Event
from ..jscompat import UNDEFINED, json_stringify, strict_equals

#: Stands for an absent key, which JS tells apart from ``null``.
_ABSENT: Any = UNDEFINED

_encode = msgspec.json.Encoder(enc_hook=enc_hook).encode
_decode = msgspec.json.Decoder().decode


# Tool schemas and prefixes compare by their JSON text (``JSON.stringify`` in the
# reference; :func:`json_stringify` here, key order kept). JS writes an integral float as an
# int; msgspec writes ``1.0``. Values from one writer are consistent, so this only matters
# across runtimes, and then at worst logs one redundant header event.
_json_text = json_stringify


def _is_array(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _non_empty(value: Any) -> bool:
    """JS ``value !== undefined && value.length > 0``: only strings and arrays have a
    length, so any other value (an object, a number, ``null``) counts as empty."""
    return isinstance(value, str | list | tuple) and len(value) > 0


def _tools_of(header: Mapping[str, Any]) -> Sequence[Any]:
    """The tool list of a header; absent (or the ``"{{tools}}"`` placeholder) is none."""
    tools = header.get("tools")
    return tools if isinstance(tools, list | tuple) else ()


def _name(tool: Any) -> Any:
    return tool.get("name") if isinstance(tool, Mapping) else None


# --- canonical form ----------------------------------------------------------------------


def canonical_header(h: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical form of a header: an empty system prompt, tool list or session prefix
    becomes absent, so each header has exactly one representation.

    Nothing is copied: ``config`` and the kept values are the input's own objects, and
    ``config`` is not normalized.

    :param h: a wire-shape header.
    :returns: a new dict with ``config``, then ``system``, ``tools`` and ``messagePrefix``
        each only when non-empty.
    """
    out: dict[str, Any] = {}
    if "config" in h:
        out["config"] = h["config"]
    for key in ("system", "tools", "messagePrefix"):
        value = h.get(key)
        if _non_empty(value):
            out[key] = value
    return out


# --- system prompt: a line delta ---------------------------------------------------------


def _lines(system: str | None) -> list[str]:
    # An absent prompt has zero lines; "" would be one empty line.
    return [] if system is None else system.split("\n")


def diff_system(prev: str | None, new: str | None) -> dict[str, Any]:
    """The line delta from one system prompt to another: keep the common prefix and the
    common suffix, insert the lines between.

    :param prev: the previous prompt, ``None`` when absent.
    :param new: the next prompt, ``None`` when absent.
    :returns: a ``SystemDelta``: ``{"keepStart", "keepEnd", "insert"}``.
    """
    a, b = _lines(prev), _lines(new)
    keep_start = 0
    while keep_start < len(a) and keep_start < len(b) and a[keep_start] == b[keep_start]:
        keep_start += 1
    # The suffix may not reuse lines the prefix already kept: "a\na" -> "a\na\na" keeps
    # two lines at the start and none at the end.
    keep_end = 0
    while (
        keep_end < len(a) - keep_start
        and keep_end < len(b) - keep_start
        and a[len(a) - 1 - keep_end] == b[len(b) - 1 - keep_end]
    ):
        keep_end += 1
    insert = b[keep_start : len(b) - keep_end]
    return {"keepStart": keep_start, "keepEnd": keep_end, "insert": insert}


def apply_system(prev: str | None, d: Mapping[str, Any]) -> str | None:
    """Apply a line delta to a system prompt.

    :param prev: the prompt the delta was made against, ``None`` when absent.
    :param d: a ``SystemDelta``.
    :returns: the new prompt, or ``None`` when it has no lines (absent).
    """
    a = _lines(prev)
    # ``a[len(a) - keep_end:]``, never ``a[-keep_end:]``, which is the whole list for 0.
    # Out-of-range and negative values slice exactly as JS ``Array.slice`` does.
    lines = [*a[: d["keepStart"]], *d["insert"], *a[len(a) - d["keepEnd"] :]]
    return "\n".join(lines) if lines else None


# --- tools: a delta keyed by name --------------------------------------------------------


def diff_tools(prev: Sequence[Any], new: Sequence[Any]) -> dict[str, Any]:
    """The name-keyed delta from one tool list to another. It cannot express a reorder or
    an insertion anywhere but the end; the writer's round-trip guard catches those.

    :param prev: the previous tool schemas.
    :param new: the next tool schemas.
    :returns: a ``ToolsDelta``: ``added`` (tools of ``new`` with a new name, in ``new``
        order), ``removed`` (names gone from ``prev``, in ``prev`` order), ``changed``
        (tools of ``new`` whose JSON text differs from the same-named one in ``prev``).
    """
    prev_by_name = {_name(t): t for t in prev}  # the last of a name wins, as in a JS Map
    new_names = {_name(t) for t in new}
    return {
        "added": [t for t in new if _name(t) not in prev_by_name],
        "removed": [_name(t) for t in prev if _name(t) not in new_names],
        "changed": [
            t
            for t in new
            if _name(t) in prev_by_name and _json_text(prev_by_name[_name(t)]) != _json_text(t)
        ],
    }


def apply_tools(prev: Sequence[Any], d: Mapping[str, Any]) -> list[Any]:
    """Apply a tools delta: drop the removed names, replace the changed tools in place,
    then append the added ones at the end.

    :param prev: the tool list the delta was made against.
    :param d: a ``ToolsDelta``.
    :returns: the new tool list.
    """
    removed = set(d.get("removed") or ())
    changed = {_name(t): t for t in d.get("changed") or ()}
    kept = [changed.get(_name(t), t) for t in prev if _name(t) not in removed]
    return [*kept, *(d.get("added") or ())]


# --- whole headers -----------------------------------------------------------------------


def call_config_equals(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Field-wise equality of two call configs.

    ``model``, ``temperature`` and ``maxTokens`` compare strictly (absent equals absent);
    ``stop`` compares element by element, and ``[]`` is *not* equal to an absent ``stop``.
    Other keys are not compared.

    :param a: one wire-shape ``LlmCallConfig`` (``None`` counts as ``{}``).
    :param b: the other.
    :returns: whether they are equal.
    """
    a = a if a is not None else {}
    b = b if b is not None else {}
    for key in ("model", "temperature", "maxTokens"):
        if not strict_equals(a.get(key, _ABSENT), b.get(key, _ABSENT)):
            return False
    sa, sb = a.get("stop", _ABSENT), b.get("stop", _ABSENT)
    if sa is _ABSENT or sb is _ABSENT:
        return sa is sb
    return len(sa) == len(sb) and all(strict_equals(x, y) for x, y in zip(sa, sb, strict=True))


def header_equals(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equality of two canonical headers: configs by :func:`call_config_equals`, system
    prompts strictly, session prefixes by JSON text, tools schema by schema *in order* by
    JSON text (absent equals ``[]`` for both), so a pure reorder is a difference.

    :param a: one canonical wire-shape header.
    :param b: the other.
    :returns: whether they are equal.
    """
    if not call_config_equals(a.get("config"), b.get("config")):
        return False
    if not strict_equals(a.get("system", _ABSENT), b.get("system", _ABSENT)):
        return False
    if _json_text(a.get("messagePrefix") or []) != _json_text(b.get("messagePrefix") or []):
        return False
    at, bt = a.get("tools") or [], b.get("tools") or []
    if not (_is_array(at) and _is_array(bt)):
        # The "{{tools}}" placeholder: the reference would raise; the JSON text decides.
        return _json_text(at) == _json_text(bt)
    return len(at) == len(bt) and all(
        _json_text(x) == _json_text(y) for x, y in zip(at, bt, strict=True)
    )


def diff_header(prev: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``request/header-delta`` payload from one canonical header to another.

    Callers must round-trip it (:func:`apply_header_delta` on ``prev`` must give ``new``,
    by :func:`header_equals`) before logging it: it cannot express every change.

    :param prev: the canonical header the log currently folds to.
    :param new: the canonical header the next request uses.
    :returns: a delta with, in this key order, ``system``, ``tools``, ``config`` and
        ``messagePrefix`` for the parts that changed (an empty ``messagePrefix`` means
        "now absent"), or ``None`` when nothing changed.
    """
    delta: dict[str, Any] = {}
    if not strict_equals(prev.get("system", _ABSENT), new.get("system", _ABSENT)):
        delta["system"] = diff_system(prev.get("system"), new.get("system"))
    if _json_text(prev.get("tools") or []) != _json_text(new.get("tools") or []):
        delta["tools"] = diff_tools(_tools_of(prev), _tools_of(new))
    if not call_config_equals(prev.get("config"), new.get("config")):
        delta["config"] = new.get("config")
    prefix = new.get("messagePrefix") or []
    if _json_text(prev.get("messagePrefix") or []) != _json_text(prefix):
        delta["messagePrefix"] = prefix
    return delta or None


def apply_header_delta(prev: Mapping[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a ``request/header-delta`` payload to a canonical header.

    :param prev: the canonical header before the delta.
    :param d: the delta payload; each of its parts replaces or edits that part of ``prev``
        (``config`` and ``messagePrefix`` are replaced whole).
    :returns: the canonical header after the delta.
    """
    out: dict[str, Any] = {}
    config = d.get("config")
    out["config"] = config if config is not None else prev.get("config")
    if d.get("system") is not None:
        out["system"] = apply_system(prev.get("system"), d["system"])
    else:
        out["system"] = prev.get("system")
    if d.get("tools") is not None:
        out["tools"] = apply_tools(_tools_of(prev), d["tools"])
    else:
        out["tools"] = prev.get("tools")
    prefix = d.get("messagePrefix")
    out["messagePrefix"] = prefix if prefix is not None else prev.get("messagePrefix")
    return canonical_header(out)


# --- the fold ----------------------------------------------------------------------------


def _corrupt(seq: int) -> RequestHeaderError:
    msg = f"request/header-delta at seq {seq} before any request/header snapshot: corrupt log"
    return RequestHeaderError(msg, seq=seq)


def _fold_one(state: dict[str, Any] | None, event: Event) -> dict[str, Any] | None:
    """The header after one more event; non-header events leave ``state`` as it is."""
    t = event.type
    if t == "request/header":
        return canonical_header(thaw(event.data)["header"])
    if t == "request/header-delta":
        if state is None:
            raise _corrupt(event.seq)
        return apply_header_delta(state, thaw(event.data))
    return state


def fold_request_header(
    events: Iterable[Event], start: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """Fold header events into the header in force after the last of them: a
    ``request/header`` snapshot replaces the state, a ``request/header-delta`` amends it.

    :param events: events in log order; all but the two header types are skipped.
    :param start: a header folded earlier to continue from.
    :returns: the canonical wire-shape header (arrays from the log may be tuples), or
        ``None`` when there is no header event (and no ``start``).
    :raises RequestHeaderError: a delta comes while there is no header yet.
    """
    state = dict(start) if start is not None else None
    for event in events:
        state = _fold_one(state, event)
    return state


class RequestHeaderFold:
    """The fold of one session's live log, kept up to date incrementally; what
    ``Session.request_header()`` returns.

    Call :meth:`advance` with the whole log before reading :meth:`current`. Only events
    not folded yet are looked at. A corrupt delta raises and the position is not
    advanced, so every later call raises again, as in the reference.
    """

    __slots__ = ("_folded", "_frozen", "_state")

    def __init__(self) -> None:
        self._folded = 0  # how many events of the log are folded in
        self._state: dict[str, Any] | None = None
        self._frozen: JsonObject | None = None

    def advance(self, events: Sequence[Event]) -> None:
        """Fold the events appended since the last call.

        :param events: the whole log (it only ever grows).
        :raises RequestHeaderError: a delta comes before any snapshot; nothing changes.
        """
        state = self._state
        end = len(events)
        for i in range(self._folded, end):
            state = _fold_one(state, events[i])
        if state is not self._state:  # a header event came: the frozen copy is stale
            self._state, self._frozen = state, None
        self._folded = end

    def current(self) -> JsonObject | None:
        """The folded header, deep-frozen (a deep copy, so the log's data stays untouched).

        :returns: the same object on every call until a header event is folded, or
            ``None`` when the log has no header yet.
        """
        if self._frozen is None and self._state is not None:
            frozen = freeze(self._state)
            assert isinstance(frozen, JsonObject)
            self._frozen = frozen
        return self._frozen


# --- the writer's round-trip guard (agent-loop level) ------------------------------------


class HeaderLog(Protocol):
    """What the writer needs from a session."""

    def request_header(self) -> Mapping[str, Any] | None:
        """The folded header, or ``None`` before any header event."""
        ...

    def append(self, type: str, data: Any, /) -> Event:
        """Append a log-only event."""
        ...


def record_request_header(
    session: HeaderLog, header: Mapping[str, Any] | msgspec.Struct, *, first: bool
) -> Event | None:
    """Append the header event a request owes the log, so that folding the log gives the
    header the request was built under. Exactly one of these happens:

    1. ``first``: a ``request/header`` snapshot, reason ``"initial"`` when the log has no
       header yet, else ``"resume"`` (even when nothing changed);
    2. the header equals the folded one: nothing;
    3. the delta round-trips: a ``request/header-delta``;
    4. otherwise (a tool reorder, an insertion before the end): a ``request/header``
       snapshot, reason ``"fallback"``.

    So every delta in the log round-trips, and the fold never needs to recover. Unlike
    the reference, the header is canonicalized first (a non-canonical ``system: ""``
    would otherwise never equal the fold), and no tools delta is logged against a
    ``"{{tools}}"`` placeholder, which the reference could not fold.

    :param session: the session whose log explains the request.
    :param header: the header the request actually uses (wire shape or ``EpochHeader``).
    :param first: whether this is the first header this loop instance records.
    :returns: the appended event, or ``None`` when nothing was appended.
    """
    # A Struct header goes through JSON so that it appends as plain dicts and lists.
    wire = _decode(_encode(header)) if isinstance(header, msgspec.Struct) else header
    canonical = canonical_header(wire)
    baseline = session.request_header()
    if first or baseline is None:
        reason = "initial" if baseline is None else "resume"
        return session.append("request/header", {"header": canonical, "reason": reason})
    if header_equals(baseline, canonical):
        return None
    delta = diff_header(baseline, canonical)
    # The reference cannot fold a tools delta onto the "{{tools}}" placeholder.
    foldable = "tools" not in (delta or {}) or _is_array(baseline.get("tools", ()))
    if (
        delta is not None
        and foldable
        and header_equals(apply_header_delta(baseline, delta), canonical)
    ):
        return session.append("request/header-delta", delta)
    return session.append("request/header", {"header": canonical, "reason": "fallback"})


class RequestHeaderWriter:
    """One agent-loop instance's writer: :func:`record_request_header` plus the flag
    saying whether this instance has recorded its anchoring snapshot yet."""

    __slots__ = ("logged",)

    def __init__(self) -> None:
        self.logged = False

    def record(
        self, session: HeaderLog, header: Mapping[str, Any] | msgspec.Struct
    ) -> Event | None:
        """Record the header of the next request; see :func:`record_request_header`.

        :param session: the session whose log explains the request.
        :param header: the header the request actually uses.
        :returns: the appended event, or ``None``.
        """
        event = record_request_header(session, header, first=not self.logged)
        self.logged = True
        return event
