"""The SessionStore: creates, registers, forks and announces sessions.

It wires each registered session's appends to the plugins' ``session_event`` hook.

Sessions created inside a :meth:`SessionStore.scope` are detached when the scope exits
(the Python shape of the reference's fiber-owned effects): they leave the store, and
their later appends reach no plugin.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from msgspec import UNSET

from .._plugins.manager import PluginHooks, PluginManager, create_plugin_manager
from .._schema.header import SESSION_FORMAT_VERSION, SessionHeader
from .._schema.registry import EventRegistry
from ..errors import SessionCwdError, SessionExistsError, SessionForkError, UnstorableError
from ..events import Event
from ..invariants import InvariantsPlugin
from ..jscompat import is_safe_integer, js_string
from .session import Clock, Session, now_ms
from .store_args import check_header_args, check_id, check_session

__all__ = ["SessionStore"]

Detach = Callable[[], None]


def _raised_by(plugin: str, event: Event) -> str:
    return f"raised by session_event of plugin {plugin!r} for {event.type} seq {event.seq}"


class SessionStore:
    """Holds the live sessions of one process.

    :param plugin_manager: where plugins (and their event types) come from; by default
        :func:`~dsh_session_core.create_plugin_manager` with the installed plugins.
    :param clock: epoch-milliseconds clock for every session created here.
    """

    def __init__(
        self,
        plugin_manager: PluginManager | None = None,
        *,
        clock: Clock | None = None,
        strict: bool = True,
        foreign_types: Iterable[str] = (),
        checks: bool = False,
    ) -> None:
        """:param plugin_manager: the plugins (default: every installed one).
        :param clock: epoch milliseconds, for event times (default: the wall clock).
        :param strict: its sessions refuse, at append, an event type no plugin declares,
            an unknown key and an unknown union member (see :meth:`Session.append`);
            ``False`` keeps them verbatim as opaque events, as a reader does.
        :param foreign_types: event-type patterns (``"myharness/*"``) appended verbatim
            even when strict.
        :param checks: also refuse, before logging, an event that breaks turn enclosure
            or tool pairing (every event inside an open turn and step, a ``tool/result``
            answering a ``tool/call`` of its turn and step...: the rules of
            :class:`~dsh_session_core.invariants.InvariantsPlugin`); a seeded or reopened
            log breaking them is refused at create.
        """
        self._strict = strict
        self._foreign = tuple(foreign_types)
        self._checks = InvariantsPlugin() if checks else None
        self._pm = plugin_manager if plugin_manager is not None else create_plugin_manager()
        self._hooks = PluginHooks(self._pm)
        self._registry = self._hooks.build_registry()
        self._hooks.session_event_listeners()  # refuse wrappers now, not at first append
        self._sessions: dict[str, Session] = {}
        self._counter = 0
        self._clock: Clock = clock if clock is not None else now_ms
        self._scopes: list[list[Detach]] = []

    @property
    def plugin_manager(self) -> PluginManager:
        """The plugin manager this store calls."""
        return self._pm

    @property
    def registry(self) -> EventRegistry:
        """The frozen event types of this store's plugins."""
        return self._registry

    # --- the lifecycle primitives -------------------------------------------------------

    def prepare(
        self,
        id: str | None = None,
        *,
        seed: Iterable[Event | Mapping[str, Any]] | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
        created_at: int | None = None,
        seed_length: int | None = None,
        seed_jsonl: bytes | None = None,
    ) -> Session:
        """Validate the id and cwd and build the session, without registering it.

        :raises TypeError: the id, ``cwd``, ``parent_session``, ``created_at`` or
            ``seed_length`` is of the wrong type (the message names what it takes).
        :raises SessionExistsError: the id is live (checked first).
        :raises SessionCwdError: ``cwd`` is not an absolute path, or holds a lone
            surrogate.
        :raises UnstorableError: ``parent_session`` holds a lone surrogate.
        :raises SeedError: the seed breaks a seeding rule.
        """
        check_id("store.create()", id, optional=True)
        check_header_args("store.create()", cwd=cwd, parent_session=parent_session,
                          created_at=created_at, seed_length=seed_length)
        if id is None:
            id = self._mint_id()
        if id in self._sessions:
            raise SessionExistsError(id)
        if cwd is not None:
            if not cwd.startswith("/"):
                raise SessionCwdError(cwd)
            _refuse_lone_surrogate(cwd, "cwd")
        if parent_session is not None:
            _refuse_lone_surrogate(parent_session, "parent session")
        header = SessionHeader(
            version=SESSION_FORMAT_VERSION,
            id=id,
            created_at=created_at if created_at is not None else self._clock(),
            cwd=cwd if cwd is not None else UNSET,
            parent_session=parent_session if parent_session is not None else UNSET,
            seed_length=seed_length if seed_length is not None else UNSET,
        )
        return Session(
            id, seed, header, registry=self._registry, clock=self._clock, seed_jsonl=seed_jsonl,
            strict=self._strict, foreign_types=self._foreign,
        )

    def _mint_id(self) -> str:
        """A new id for a session created without one: ``session-<n>``, as the
        reference mints them (the number is used up even if the id is taken)."""
        self._counter += 1
        return f"session-{self._counter}"

    def enter(self, session: Session) -> Detach:
        """Register ``session`` and wire its appends to ``session_event``.

        :returns: the detach function: unwires and unregisters the session.
        :raises SessionExistsError: a session with its id is already live.
        """
        if session.id in self._sessions:
            raise SessionExistsError(session.id)
        hooks = self._hooks

        def notify(event: Event) -> None:
            listeners = hooks.session_event_listeners()
            if len(listeners) == 1:  # the usual store: one listener, no list of errors
                plugin, fn = listeners[0]
                try:
                    fn(session=session, event=event)
                except Exception as exc:
                    exc.add_note(_raised_by(plugin, event))
                    raise
                return
            errors: list[Exception] = []
            for plugin, fn in listeners:
                try:
                    fn(session=session, event=event)
                except Exception as exc:  # every listener runs first
                    exc.add_note(_raised_by(plugin, event))
                    errors.append(exc)
            if len(errors) == 1:
                raise errors[0]
            if errors:
                msg = f"{len(errors)} session_event listeners failed on seq {event.seq}"
                raise ExceptionGroup(msg, errors)

        if self._checks is not None:
            self._checks.watch(session)  # a seeded log breaking a rule is refused here
            session._guard = functools.partial(self._checks.session_event, session)
        session.on_append = notify
        self._sessions[session.id] = session

        def detach() -> None:
            if session.on_append is notify:
                session.on_append = None
                session._guard = None
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]

        return detach

    def announce(self, session: Session) -> None:
        """Fire ``session_created`` for an entered session."""
        self._hooks.session_created(session)

    # --- the common case ----------------------------------------------------------------

    def create(
        self,
        id: str | None = None,
        *,
        seed: Iterable[Event | Mapping[str, Any]] | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
        created_at: int | None = None,
        seed_length: int | None = None,
        seed_jsonl: bytes | None = None,
    ) -> Session:
        """Create, register and announce a session.

        :param id: the id; ``session-<n>`` is minted when omitted.
        :param seed: events to start from (a reloaded or forked log).
        :param cwd: absolute working directory, stored in the header.
        :param parent_session: lineage, stored in the header.
        :param created_at: keep a persisted session's creation time on reload.
        :param seed_length: the persisted seed boundary on reload (not ``len(seed)``).
        :param seed_jsonl: the seed's log lines as stored, when known (spares encoding).
        :raises SessionExistsError: the id is live.
        :raises SessionCwdError: ``cwd`` is not absolute.
        :raises SeedError: the seed breaks a seeding rule.
        """
        session = self.prepare(
            id,
            seed=seed,
            cwd=cwd,
            parent_session=parent_session,
            created_at=created_at,
            seed_length=seed_length,
            seed_jsonl=seed_jsonl,
        )
        return self._register(session)

    def _register(self, session: Session) -> Session:
        """Enter and announce a prepared session (in the current scope, if any)."""
        detach = self.enter(session)
        try:
            self.announce(session)
        except BaseException:
            detach()
            raise
        if self._scopes:
            self._scopes[-1].append(detach)
        return session

    def get(self, id: str) -> Session | None:
        """The live session with this id, or ``None``."""
        return self._sessions.get(id)

    def live(self) -> list[Session]:
        """The live sessions of this store, in creation order (a new list): those this
        process created, opened or forked here and has not released. What is stored
        (what ``dsh-session ls`` lists) is :meth:`DurableStore.stored
        <dsh_session_core.DurableStore.stored>`."""
        return list(self._sessions.values())

    def list(self) -> list[Session]:
        """Deprecated: :meth:`live` (the live sessions), or, for what is stored (what
        ``dsh-session ls`` lists), ``DurableStore.stored()``. The name was ambiguous.

        :deprecated: warns :class:`DeprecationWarning`; will be removed.
        """
        import warnings

        warnings.warn(
            "store.list() is deprecated: it gives the live sessions of this store, "
            "store.live(); the stored sessions (what `dsh-session ls` lists) are "
            "store.stored()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.live()

    def detach(self, session: Session) -> None:
        """Take ``session`` out of the store; its later appends reach no plugin."""
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        session.on_append = None

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Sessions created inside the ``with`` block are detached when it exits."""
        detachers: list[Detach] = []
        self._scopes.append(detachers)
        try:
            yield
        finally:
            self._scopes.remove(detachers)
            for detach in reversed(detachers):
                detach()

    # --- durability checkpoints ---------------------------------------------------------

    def flush(self, session: Session) -> None:
        """Run every ``session_flush`` implementation (synchronous backends).

        :raises Exception: the implementation's error, after all implementations ran
            (an ``ExceptionGroup`` when several failed).
        :raises TypeError: an implementation returned an awaitable: use :meth:`aflush`.

        A read-only session (``DurableStore.read_session``) has nothing to write: no
        implementation is called for it.

        :raises TypeError: ``session`` is not a :class:`Session`.
        """
        if session.__class__ is not Session:
            check_session("store.flush()", session)
        if session.read_only:
            return
        awaitables, errors = self._hooks.session_flush(session)
        for aw in awaitables:
            close = getattr(aw, "close", None)
            if close is not None:
                close()  # never awaited: close it so Python does not warn
            errors.append(TypeError("a session_flush hook returned an awaitable; use aflush"))
        _raise_all(errors, "session_flush implementations failed")

    async def aflush(self, session: Session) -> None:
        """Run every ``session_flush`` implementation and await those that are async.

        Synchronous implementations (file and database writes) run in a worker thread,
        so the event loop is never blocked on an fsync.
        """
        check_session("store.aflush()", session)
        if session.read_only:
            return
        import asyncio  # only asyncio hosts pay for importing it

        awaitables, errors = await asyncio.to_thread(self._hooks.session_flush, session)
        results = await asyncio.gather(*awaitables, return_exceptions=True)
        errors.extend(r for r in results if isinstance(r, Exception))
        _raise_all(errors, "session_flush implementations failed")

    # --- forking ------------------------------------------------------------------------

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_id: str | None = None,
    ) -> Session:
        """Create a child session seeded with ``source``'s log up to a ``turn/end``.

        :param source: the live session (or its id) to fork, or a read-only session
            (``DurableStore.read_session``): what it was read with is forked, and the
            session read is left as it is.
        :param boundary: the seq of a ``turn/end`` to cut after; the last event when
            omitted (an empty source gives an empty child).
        :param child_id: the child's id; minted when omitted.
        :raises SessionForkError: with ``code`` saying why (see the reference's codes).
        :raises TypeError: ``source`` is neither a session nor an id, or ``child_id`` is
            not a str.
        """
        if not isinstance(source, str):
            check_session("store.fork()", source, "a Session or its id (a str)")
        check_id("store.fork()", child_id, optional=True)
        if child_id is not None and child_id in self._sessions:
            msg = f'session "{child_id}" already exists'
            raise SessionForkError(msg, "SESSION_ALREADY_EXISTS")
        src = self._resolve(source)
        events = src.events
        if boundary is None and len(events) == 0:
            seed: list[Event] = []
        else:
            b: Any = boundary if boundary is not None else events[-1].seq
            if not (is_safe_integer(b) and b >= 0):
                msg = (
                    f'fork boundary for session "{src.id}" must be a non-negative safe '
                    f"integer, got {js_string(b)}"
                )
                raise SessionForkError(msg, "INVALID_BOUNDARY")
            b = int(b)
            if b >= len(events):
                last = events[-1].seq if len(events) else "none"
                msg = f'fork boundary {b} does not exist in session "{src.id}" (last seq: {last})'
                raise SessionForkError(msg, "INVALID_BOUNDARY")
            at = events[b]
            if at.seq != b:
                msg = (
                    f"fork boundary {b} does not match a contiguous event seq in session "
                    f'"{src.id}"'
                )
                raise SessionForkError(msg, "INVALID_BOUNDARY")
            if at.type != "turn/end":
                msg = f'fork boundary {b} in session "{src.id}" must be turn/end, got {at.type}'
                raise SessionForkError(msg, "OPEN_TURN")
            # Events are immutable, so parent and child can share them safely.
            seed = list(events[: b + 1])
        cwd = src.header.cwd
        return self.create(
            child_id,
            seed=seed,
            cwd=cwd if isinstance(cwd, str) else None,
            parent_session=src.id,
            seed_length=len(seed),
        )

    def _resolve(self, source: Session | str) -> Session:
        if not isinstance(source, str) and source.read_only:
            return source  # a snapshot read without the lock: nothing here writes it
        sid = source if isinstance(source, str) else source.id
        live = self._sessions.get(sid)
        if live is None:
            msg = f'session "{sid}" not found'
            raise SessionForkError(msg, "SESSION_NOT_FOUND")
        if not isinstance(source, str) and live is not source:
            msg = f'session "{sid}" is not the live store instance'
            raise SessionForkError(msg, "SESSION_NOT_LIVE")
        return live


def _raise_all(errors: list[Exception], message: str) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup(message, errors)


def _refuse_lone_surrogate(text: str, what: str) -> None:
    """Refuse a header string with no UTF-8 form at create, on every store: no log line,
    text column or file holds it, so it would otherwise fail the first flush. (A cwd
    read through ``os.getcwd()`` in a directory whose name is not UTF-8 holds such
    surrogate escapes.)

    :raises SessionCwdError: ``what`` is the cwd.
    :raises UnstorableError: ``what`` is the parent session.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        problem = (f"it holds a lone surrogate (U+{ord(text[exc.start]):04X} at index "
                   f"{exc.start}), which has no UTF-8 form, so no log can hold it")
        if what == "cwd":
            raise SessionCwdError(text, problem) from None
        msg = f"the parent session {text!r} cannot be stored: {problem}"
        raise UnstorableError(msg, session_id=text, seq=None) from None
