"""The Session: an append-only log of typed events, its surface, and its derived history.

``append`` validates before anything changes: the payload must be a lossless JSON value
matching its type's registered schema, and the surface op must fit. A refused append
leaves the log and its seq untouched. A logged event is immutable and is delivered to the
session's listener in seq order, even when the listener appends re-entrantly or raises.

What an append checks off its fast path, and the errors it raises, are in
:mod:`.append_checks`; how a seed is checked, in :mod:`.seed`.
"""

from __future__ import annotations

import time as _time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import msgspec
from msgspec import UNSET

from .._base.json_values import MAX_JSON_DEPTH, JsonObject, freeze, json_text_depth, thaw
from .._schema.codec import ENCODER, encode_events, encode_line
from .._schema.header import SESSION_FORMAT_VERSION, SessionHeader
from .._schema.registry import EventRegistry, RegisteredEvent
from ..errors import SurfaceError, SurfaceIntentError
from ..events import Event, OpaqueEvent, ReplaceOp, SurfaceOp
from ..vocabulary import Message
from .append_checks import (
    checked_seqs,
    checked_untyped,
    misplaced_op,
    missing_op,
    shown,
    too_deep,
    untyped_payload,
)
from .derive import Derivation
from .request_header import RequestHeaderFold
from .seed import check_seed
from .surface import Surface

__all__ = ["EventsView", "Session", "now_ms"]

Clock = Callable[[], int]
_encode = encode_line
_encode_fast = ENCODER.encode
_convert = msgspec.convert
Listener = Callable[[Event], None]


def now_ms() -> int:
    """Wall-clock epoch milliseconds (the default clock)."""
    return _time.time_ns() // 1_000_000


class EventsView(Sequence[Event]):
    """A read-only, live view of a session's log: later appends show through it."""

    __slots__ = ("_events",)

    def __init__(self, events: list[Event]) -> None:
        self._events = events

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __repr__(self) -> str:
        return f"<EventsView of {len(self._events)} events>"


class Session:
    """An append-only, event-sourced session log.

    :param id: the session id (any string; the store mints ``session-<n>`` ids).
    :param seed: complete events to start from (a reloaded or forked log), as events or
        in their wire shape. Checked as the reference checks seeds; no listener fires
        for them. Replace ops in a seed are checked lazily, when the surface is read.
    :param header: the immutable header; synthesized as ``{version: 0, id, createdAt:
        now}`` when absent.
    :param registry: the event types to validate against; core's types by default.
    :param clock: returns epoch milliseconds; injectable for tests and replays.
    :param seed_jsonl: the JSONL bytes of exactly the seed events, when the caller has
        them (a log read from disk): the session then never re-encodes its seeded part.
    :param strict: refuse, at append, what a lenient reader would keep verbatim as an
        opaque event: an event type no plugin declares, an unknown key, an unknown
        member of a merge-extensible union (see :meth:`append`). On by default; turn it
        off for a harness that appends foreign events on purpose.
    :param foreign_types: event types (``fnmatch`` patterns such as ``"myharness/*"``)
        appended verbatim even when ``strict``: the per-type allowance.
    """

    __slots__ = (
        "_built",
        "_candidates",
        "_created",
        "_derivation",
        "_dispatching",
        "_events",
        "_foreign",
        "_guard",
        "_header",
        "_header_fold",
        "_id",
        "_lines",
        "_lookup",
        "_prefix",
        "_prefix_len",
        "_queue",
        "_registry",
        "_strict",
        "_surface",
        "_view",
        "clock",
        "on_append",
    )

    def __init__(
        self,
        id: str,  # the reference's name for it
        seed: Iterable[Event | Mapping[str, Any]] | None = None,
        header: SessionHeader | None = None,
        *,
        registry: EventRegistry | None = None,
        clock: Clock | None = None,
        seed_jsonl: bytes | None = None,
        strict: bool = True,
        foreign_types: Iterable[str] = (),
    ) -> None:
        if registry is None:
            from .._plugins.core_plugin import core_registry

            registry = core_registry()
        self._id = id
        self._registry = registry
        self._strict = bool(strict)
        self._foreign = tuple(foreign_types)
        #: Checks each event after it is built and before it is logged (the store's
        #: ``checks``); raising refuses the append with nothing changed.
        self._guard: Callable[[Event], None] | None = None
        self._lookup = registry._lookup
        self.clock: Clock = clock if clock is not None else now_ms
        self._header = (
            header
            if header is not None
            else SessionHeader(version=SESSION_FORMAT_VERSION, id=id, created_at=self.clock())
        )
        candidates: list[int] = []
        if seed is not None:
            self._events, candidates = check_seed(registry, seed)
        else:
            self._events = []
        self._view = EventsView(self._events)
        # Each event's log line is encoded once: the seeded part as one block (given, or
        # made on first use), then one line per append, made as the event is appended.
        self._prefix: memoryview | None = None
        if not self._events:
            self._prefix = memoryview(b"")
        elif seed_jsonl is not None:
            self._prefix = memoryview(seed_jsonl)
        self._prefix_len = len(self._events)
        self._lines: list[bytes] = []
        self._candidates = candidates
        self._surface = Surface(self._events, candidates)
        self._derivation = Derivation(self._events, self._surface)
        self._header_fold = RequestHeaderFold()
        #: Called with each appended event (the store wires its plugins here).
        self.on_append: Listener | None = None
        self._queue: deque[Event] = deque()
        self._dispatching = False
        #: False when a store made it from a stored log (``open``); see :attr:`created`.
        self._created = True
        #: The entries the builders log fast (:func:`~.built.built_entries`), once used.
        self._built: Mapping[str, RegisteredEvent] | None = None

    # --- identity and state -------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id."""
        return self._id

    @property
    def header(self) -> SessionHeader:
        """The immutable header."""
        return self._header

    @property
    def registry(self) -> EventRegistry:
        """The event types this session validates against."""
        return self._registry

    @property
    def strict(self) -> bool:
        """Whether appends refuse what would only be kept opaquely (see :meth:`append`)."""
        return self._strict

    @property
    def foreign_types(self) -> tuple[str, ...]:
        """The event-type patterns appended verbatim even when strict."""
        return self._foreign

    @property
    def created(self) -> bool:
        """Whether this session was started here rather than resumed: ``True`` for one
        made by ``store.create``, ``store.fork`` or ``store.open_or_create`` when nothing
        was stored under its id; ``False`` for a stored session resumed by
        ``store.open``, ``store.open_or_create`` or read by ``store.read_session``."""
        return self._created

    @property
    def read_only(self) -> bool:
        """Whether appends are refused (:class:`~dsh_session_core.errors.ReadOnlySessionError`):
        ``True`` for a session read with ``store.read_session(id)``, which holds no
        writer lock."""
        return False

    @property
    def events(self) -> EventsView:
        """The log: a read-only live view."""
        return self._view

    @property
    def seq(self) -> int:
        """The seq the next event will get (the log's length)."""
        return len(self._events)

    @property
    def surface(self) -> Surface:
        """The surface linked list."""
        return self._surface

    def __repr__(self) -> str:
        return f"<Session {self._id!r} with {len(self._events)} events>"

    # --- appending ----------------------------------------------------------------------

    def append(
        self,
        type: str,  # the log's own field name
        data: Any,
        *,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Iterable[int] | None = None,
    ) -> Event:
        """Validate and append one event; return the logged (immutable) event.

        :param type: the event type, e.g. ``"user/message"``.
        :param data: the payload, as a dict in the wire shape (camelCase keys) or as the
            type's payload Struct.
        :param surface_op: required on surface types, refused on others: ``"append"``,
            or ``ReplaceOp(start, end)`` (also as ``{"op": "replace", ...}``) naming live
            surface nodes in order.
        :param source_event_seqs: provenance seqs (surface types only).
        :raises NotJsonError: ``data`` holds a value JSON cannot carry losslessly.
        :raises TooDeepError: ``data`` nests deeper than :data:`MAX_JSON_DEPTH`.
        :raises SchemaError: ``data`` does not match the registered schema; when the
            session is strict, also an unknown key (:class:`UnknownFieldError`) or an
            unknown member of a merge-extensible union (:class:`UnknownMemberError`),
            each naming its path and the closest known name.
        :raises SurfaceIntentError: the surface op is missing, misplaced or does not fit,
            or ``source_event_seqs`` is not a list of integers.
        :raises EventTypeError: ``type`` is not a string; when the session is strict,
            no installed plugin declares it (:class:`UnknownEventTypeError`).

        Any other input is accepted (a lone surrogate anywhere, an integer of any size),
        and nothing else is raised: a refused append leaves the log untouched.
        """
        events = self._events
        seq = len(events)
        try:
            entry = self._lookup.get(type)
        except TypeError:  # an unhashable type: refused below
            entry = None
        payload: Any = None
        if entry is not None:
            # The fast path: a plain dict (or the type's own payload Struct) decoded against
            # its schema in one msgspec call, in C. Any other value, or one that does not
            # decode, takes the careful path below (untyped_payload: the JSON, strict and
            # schema checks), which refuses it or keeps it as an opaque event.
            try:
                if data.__class__ is dict:
                    payload = _convert(data, entry.payload)
                elif data.__class__ is entry.payload:
                    # Struct constructors do not validate: round-trip to check (and copy).
                    payload = msgspec.json.decode(ENCODER.encode(data), type=entry.payload)
            except (msgspec.ValidationError, TypeError, UnicodeEncodeError, RecursionError):
                # UnicodeEncodeError: msgspec cannot match a key holding a lone surrogate;
                # the careful path below reads it as an extension. RecursionError: typed
                # blocks nested far past the depth limit; the careful path refuses them.
                payload = None
            if payload is not None and entry.untyped_fields:
                payload = checked_untyped(entry, payload, type, seq)
        if payload is None:
            opaque_data = untyped_payload(
                self._registry, self._strict, self._foreign, entry, type, data, seq
            )
            return self._append_opaque(entry, type, opaque_data, surface_op, source_event_seqs)
        surface = entry.surface  # type: ignore[union-attr]  # payload set implies entry
        if surface:
            if surface_op is None:
                raise missing_op(type, seq)
            op = self._checked_op(type, surface_op, seq)
            seqs = checked_seqs(type, source_event_seqs, seq)
            event: Event = entry.event(  # type: ignore[union-attr,call-arg]
                seq, self.clock(), payload, seqs, op
            )
        else:
            if surface_op is not None or source_event_seqs is not None:
                raise misplaced_op(type, seq, surface_op)
            event = entry.event(seq, self.clock(), payload)  # type: ignore[union-attr]
        try:  # before anything changes: encoding may refuse a value
            line = _encode_fast(event)
        except UnicodeEncodeError:  # a lone surrogate: encoded as JS does, slowly
            line = encode_line(event)
        # Only a schema that nests (a block holding blocks) can be too deep here, and
        # only in a long line: a typed line costs one comparison.
        if (
            len(line) > entry.deep_line  # type: ignore[union-attr]
            and json_text_depth(line) > MAX_JSON_DEPTH + 1
        ):
            raise too_deep(type, seq, thaw(payload), 0)
        # Every check above may raise and none has changed anything; the guard (the
        # store's checks) is the last that may refuse. Only then does the log change,
        # so a refused append leaves the log and its seq untouched.
        if self._guard is not None:
            self._guard(event)
        events.append(event)
        self._lines.append(line)
        if surface:
            self._candidates.append(seq)
        if self.on_append is not None:
            self._dispatch(event)
        return event

    def _append_built(
        self, entry: RegisteredEvent, payload: Any, op: SurfaceOp | None = None,
        seqs: Any = UNSET,
    ) -> Event:
        """Log a payload the builders made of values they checked: :meth:`append` less
        its reading of the data (the builders' fast path, :mod:`.builders`).

        The caller vouches that ``payload`` is what ``append``'s decode would make of
        the same wire dict (an ``entry.payload`` holding values of its fields' types,
        and ``entry`` has no untyped field), and, for a surface type, that ``op`` is
        ``"append"`` and ``seqs`` ``UNSET`` or a tuple of ints. From the event on this is
        ``append``'s own tail, kept beside it rather than shared (a call more would cost
        every plain append): the depth limit, the guard, then the log, the line, the
        surface and the listener, so a refused event still leaves the log untouched.
        """
        events = self._events
        seq = len(events)
        surface = entry.surface
        if surface:
            event: Event = entry.event(seq, self.clock(), payload, seqs, op)  # type: ignore[call-arg]
        else:
            event = entry.event(seq, self.clock(), payload)
        try:
            line = _encode_fast(event)
        except UnicodeEncodeError:
            line = encode_line(event)
        if len(line) > entry.deep_line and json_text_depth(line) > MAX_JSON_DEPTH + 1:
            raise too_deep(entry.type, seq, thaw(payload), 0)
        if self._guard is not None:
            self._guard(event)
        events.append(event)
        self._lines.append(line)
        if surface:
            self._candidates.append(seq)
        if self.on_append is not None:
            self._dispatch(event)
        return event

    def _own_append(self) -> bool:
        """Whether its ``append`` is Session's, not a subclass's (see :mod:`.built`)."""
        return type(self).append is Session.append

    def _append_opaque(
        self,
        entry: RegisteredEvent | None,
        type: str,
        data: Any,
        surface_op: Any,
        source_event_seqs: Iterable[int] | None,
    ) -> Event:
        seq = len(self._events)
        surface = entry.surface if entry is not None else type in self._registry.surface_types
        wire: dict[str, Any] = {"type": type, "seq": seq, "time": self.clock(), "data": data}
        if surface:
            if surface_op is None:
                raise missing_op(type, seq)
            op = self._checked_op(type, surface_op, seq)
            seqs = checked_seqs(type, source_event_seqs, seq)
            if seqs is not UNSET:
                wire["sourceEventSeqs"] = seqs
            wire["surfaceOp"] = op if op == "append" else freeze(msgspec.to_builtins(op))
        elif surface_op is not None or source_event_seqs is not None:
            raise misplaced_op(type, seq, surface_op)
        frozen = JsonObject(wire)
        event = OpaqueEvent(seq, wire["time"], data, wire=frozen)
        line = _encode(frozen)
        if self._guard is not None:
            self._guard(event)
        self._events.append(event)
        self._lines.append(line)
        if surface:
            self._candidates.append(seq)
        if self.on_append is not None:
            self._dispatch(event)
        return event

    def _checked_op(self, type: str, op: Any, seq: int) -> SurfaceOp:
        if op.__class__ is str and op == "append":
            return "append"
        if op.__class__ is ReplaceOp:
            # Struct constructors do not validate: ReplaceOp(True, 1.0) is no op.
            if op.start.__class__ is not int or op.end.__class__ is not int:
                msg = (
                    f'session event "{type}" has an invalid surfaceOp {shown(op)}: start and end '
                    f"must be integers (seqs of live surface nodes)"
                )
                raise SurfaceIntentError(msg, event_type=type, seq=seq)
        else:
            if isinstance(op, JsonObject):
                op = dict(op)  # a logged op, appended again
            try:
                op = msgspec.convert(op, ReplaceOp)
            except (msgspec.ValidationError, TypeError, UnicodeEncodeError):
                msg = (
                    f'session event "{type}" has an invalid surfaceOp {shown(op)}: use "append" '
                    f"or ReplaceOp(start, end)"
                )
                raise SurfaceIntentError(msg, event_type=type, seq=seq) from None
        try:
            problem = self._surface.check(op)
        except SurfaceError as exc:
            problem = f"the surface is broken by an earlier replace: {exc}"
        if problem is not None:
            msg = f'session event "{type}" cannot be appended: {problem}'
            raise SurfaceIntentError(msg, event_type=type, seq=seq)
        return op  # type: ignore[no-any-return]

    def _dispatch(self, event: Event) -> None:
        """Deliver ``event`` to the listener; nested appends queue behind it."""
        if self._dispatching:
            self._queue.append(event)
            return
        self._dispatching = True
        failed: Exception | None = None
        later: list[Exception] | None = None
        try:
            # The usual append: delivered without the queue, and nothing allocated
            # unless the listener raises. What it appends is delivered after it, in order.
            try:
                listener = self.on_append
                if listener is not None:
                    listener(event)
            except Exception as exc:  # raised once all have run
                failed = exc
            queue = self._queue
            while queue:
                ev = queue.popleft()
                listener = self.on_append
                if listener is None:
                    continue
                try:
                    listener(ev)
                except Exception as exc:
                    later = [*(later or ()), exc]
        finally:
            self._dispatching = False
        if failed is None and later is None:
            return
        errors = [*((failed,) if failed is not None else ()), *(later or ())]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            msg = f"{len(errors)} session_event listeners failed"
            raise ExceptionGroup(msg, errors)

    # --- serializing --------------------------------------------------------------------

    def jsonl(self, start: int = 0, stop: int | None = None) -> bytes:
        """The log lines of ``events[start:stop]`` as JSONL (each line ``\\n``-ended).

        Lines are encoded once, when an event is appended (or read), so this only joins.
        """
        parts = self._line_parts(start, len(self._events) if stop is None else stop)
        if not parts:
            return b""
        parts.append(b"")
        return b"\n".join(parts)

    def to_jsonl(self) -> bytes:
        """The whole log in the reference's JSONL format: header line, then events."""
        parts = self._line_parts(0, len(self._events))
        parts.insert(0, _encode(self._header))
        parts.append(b"")
        return b"\n".join(parts)

    def _line_parts(self, start: int, stop: int) -> list[bytes | memoryview]:
        # One join over views and lines makes one allocation: copying a 16 MB log
        # twice costs more than encoding it (fresh pages fault in).
        parts: list[bytes | memoryview] = []
        seeded = self._prefix_len
        if start < min(stop, seeded):
            if start == 0 and stop >= seeded:
                if self._prefix is None:
                    self._prefix = memoryview(encode_events(self._events[:seeded]))
                block = self._prefix
            else:
                block = memoryview(encode_events(self._events[start : min(stop, seeded)]))
            if len(block):
                parts.append(block[:-1])  # drop its last newline: the join puts it back
        if stop > seeded:
            parts.extend(self._lines[max(0, start - seeded) : stop - seeded])
        return parts

    # --- deriving -----------------------------------------------------------------------

    def derive_messages(self) -> list[Message]:
        """The LLM message history derived from the surface (new list, shared messages).

        :raises SurfaceError: a seeded replace op does not fit the surface.
        """
        return self._derivation.messages()

    @staticmethod
    def derive_event_message(event: Event) -> Message | None:
        """One event's projection, whether or not it is on the surface."""
        return event.message()

    def request_header(self) -> JsonObject | None:
        """The folded request header (read-only, wire shape), or ``None`` before any.

        :raises RequestHeaderError: a delta precedes every snapshot.
        """
        self._header_fold.advance(self._events)
        return self._header_fold.current()

    # --- builders (see _model/builders.py, _model/turn.py, _model/step.py) ---
    # The builders load on first use (a session that never builds does not import
    # them); their types are named for type checkers only.
    from typing import TYPE_CHECKING as _TYPES_ONLY

    if _TYPES_ONLY:
        from ..vocabulary import MessageSource, TurnTrigger
        from .builders import Content
        from .turn import Turn

    def turn(
        self, trigger: TurnTrigger | Mapping[str, Any] | None = None, *, number: int | None = None
    ) -> Turn:
        """Append ``turn/start`` and return the open turn; ``with`` ends it on exit
        (``error`` or ``aborted`` when the block raises). See ``docs/builders.md``.

        :param trigger: what started it; by default a message from the user.
        :param number: the turn number; by default 1 + the last ``turn/start``'s.
        :raises TurnStateError: a turn is still open.
        """
        from .turn import start_turn

        return start_turn(self, trigger, number=number)

    def inject(
        self,
        content: Content,
        *,
        source: MessageSource | Mapping[str, Any] | None = None,
        number: int | None = None,
    ) -> Event:
        """An idle-time injection in its own one-shot turn (``turn/start`` with trigger
        ``injection``, ``context/message``, ``turn/end``); returns the message.

        :param source: who injected it (the trigger's and the message's); the user by
            default.
        :raises TurnStateError: a turn is open (inject into it with ``turn.context()``).
        """
        from .turn import inject

        return inject(self, content, source=source, number=number)
