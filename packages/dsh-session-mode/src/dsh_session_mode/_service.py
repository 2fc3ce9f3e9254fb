"""``Modes``: the session-mode service (``ctx.modes`` in the reference).

It owns the pending switches, the turn-boundary flush that logs them, the notices that
tell the model about a switch, and both policy layers: the soft one (the prompt section
and the tool list offered to the model) and the hard one (the gate before a tool runs).

How a harness drives it
-----------------------

A user's switch (:meth:`Modes.set`) is only *recorded*: every event must be
turn-enclosed and an idle session has no open turn, so it is logged at the next turn
boundary, a ``turn/start`` or a ``step/end``. The boundary can be signalled either way:

* register the service on the store's plugin manager, ``pm.register(modes)``: its
  ``session_event`` implementation flushes when it sees ``turn/start`` or ``step/end``,
  appending re-entrantly (core delivers the nested events after the boundary event, in
  seq order), and logs and swallows a failure as the reference does; or
* call :meth:`Modes.flush` yourself right after appending the boundary event (errors
  then reach you).

An agent created with an initial mode is ``modes.set(session, mode)`` at creation.
"""

from __future__ import annotations

__all__ = ["ModeState", "Modes"]

import builtins
import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from dsh_session_core import Event, Session, hookimpl

from ._config import DEFAULT_MODE, EXIT_PLAN_MODE, PLAN_MODE, ModeConfig, ModeDefinition
from ._config import resolve_config as _resolve
from ._fold import fold_mode, mode_at_last_header
from .errors import UnknownModeError

_log = logging.getLogger("dsh_session_mode")

#: Where the mode plugin's context notices say they come from.
_SOURCE: Mapping[str, Any] = {"kind": "plugin", "plugin": "mode"}

_BOUNDARIES = frozenset({"turn/start", "step/end"})


@dataclasses.dataclass(frozen=True, slots=True)
class ModeState:
    """A session's mode as a picker shows it.

    :param current: the mode in force: the folded mode when it is defined, else
        ``"default"`` (a log naming a mode the config dropped reads as the default).
    :param pending: the switch awaiting the next boundary, or ``None``.
    """

    current: str
    pending: str | None = None


class Modes:
    """The session-mode service of one deployment: a configuration plus, per session,
    the pending switch and the dropped-mode notice already given.

    :param config: a :class:`ModeConfig`, or the raw configuration for
        :func:`~dsh_session_mode.resolve_config`; the built-in ``plan`` alone by default.
    :param logger: where a failed boundary flush is reported from the ``session_event``
        hook; ``logging.getLogger("dsh_session_mode")`` by default.
    :raises ModeConfigError: the raw configuration is malformed.
    """

    def __init__(
        self,
        config: ModeConfig | Mapping[str, Any] | None = None,
        *,
        logger: logging.Logger | None = None,
    ) -> None:
        self._config = config if isinstance(config, ModeConfig) else _resolve(config)
        self._logger = logger if logger is not None else _log
        # Keyed by the session object, as the reference's WeakMaps are: a new session
        # reusing an id starts clean. (Sessions take no weak references, so entries are
        # dropped explicitly: a pending one when flushed, all of them by `forget`.)
        self._pending: dict[Session, str] = {}
        self._narrated: dict[Session, str] = {}

    @property
    def config(self) -> ModeConfig:
        """The validated definitions."""
        return self._config

    # --- reading -------------------------------------------------------------------------

    def list(self) -> builtins.list[str]:
        """The selectable modes: ``"default"`` first, then the definitions in order."""
        return [DEFAULT_MODE, *self._config.definitions]

    def active_definition(self, session: Session) -> ModeDefinition | None:
        """The definition of the session's folded mode, or ``None`` when the fold is
        ``default`` or names a mode the configuration does not define (any more)."""
        name = fold_mode(session.events)
        if name == DEFAULT_MODE:
            return None
        return self._config.definitions.get(name)

    def get(self, session: Session) -> ModeState:
        """The mode in force and the pending switch, if any."""
        active = self.active_definition(session)
        current = active.name if active is not None else DEFAULT_MODE
        return ModeState(current=current, pending=self._pending.get(session))

    # --- switching -----------------------------------------------------------------------

    def set(self, session: Session, mode: str) -> None:
        """Record a switch to ``mode``, logged at the session's next turn boundary.

        Nothing is appended now. A switch to the mode already pending (or, with none
        pending, to the current mode) changes nothing; otherwise the latest switch
        replaces any earlier pending one.

        :raises UnknownModeError: ``mode`` is neither ``default`` nor defined.
        """
        if mode != DEFAULT_MODE and mode not in self._config.definitions:
            raise UnknownModeError(mode, tuple(self.list()))
        pending = self._pending.get(session)
        target = pending if pending is not None else self.get(session).current
        if mode == target:
            return
        self._pending[session] = mode

    def flush(self, session: Session, *, turn_start: bool = False) -> builtins.list[Event]:
        """One boundary pass; call it right after appending ``turn/start`` or ``step/end``.

        In order: at a turn start only, a notice when the fold names a mode the config
        no longer defines (once per name and session); then the pending switch, if any,
        is cleared and, unless the log already folds to it, appended as ``mode/set``,
        followed by a notice when the last logged request header was built under a
        different mode (no notice before the first header).

        :param turn_start: the boundary is a ``turn/start`` (else a ``step/end``).
        :returns: the events appended, in order (often none).
        :raises Exception: whatever ``session.append`` raises; the pending switch is
            already cleared by then, as in the reference.
        """
        appended: builtins.list[Event] = []
        if turn_start:
            notice = self._notice_dropped_definition(session)
            if notice is not None:
                appended.append(notice)
        target = self._pending.pop(session, None)
        if target is None or target == fold_mode(session.events):
            return appended  # nothing pending, or the switches cancelled out
        appended.append(session.append("mode/set", {"mode": target}))
        told = mode_at_last_header(session.events)
        if told is None or told == target:
            # Before any header the prompt section itself states the mode; a header
            # that already matches needs no correction.
            return appended
        text = (
            "The user switched this session back to the default mode."
            if target == DEFAULT_MODE
            else f"The user switched this session to {target} mode."
        )
        appended.append(_notice(session, text))
        return appended

    def forget(self, session: Session) -> None:
        """Drop what the service remembers about ``session`` (its pending switch and the
        dropped-mode notice already given); call it when a session is disposed."""
        self._pending.pop(session, None)
        self._narrated.pop(session, None)

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        """Flush at ``turn/start`` and ``step/end`` when registered on a plugin manager.

        A failure is logged as ``dsh-mode: boundary flush failed: ...`` and swallowed: a
        policy plugin must not break the session's event feed.
        """
        if event.type not in _BOUNDARIES:
            return
        try:
            self.flush(session, turn_start=event.type == "turn/start")
        except Exception as exc:  # contained, as in the reference
            self._logger.warning("dsh-mode: boundary flush failed: %s", exc, exc_info=exc)

    def _notice_dropped_definition(self, session: Session) -> Event | None:
        name = fold_mode(session.events)
        if name == DEFAULT_MODE or name in self._config.definitions:
            return None
        if self._narrated.get(session) == name:
            return None
        self._narrated[session] = name
        text = (
            f'Mode "{name}" is no longer defined in this deployment\'s configuration; the '
            f"session continues in the default mode."
        )
        return _notice(session, text)

    # --- the soft layer: what the model is offered ----------------------------------------

    def policy_section(self, session: Session | None) -> str:
        """The ``mode:policy`` prompt section (order 50): the active definition's
        section, ``""`` in the default mode and without a session."""
        if session is None:
            return ""
        active = self.active_definition(session)
        return active.section if active is not None else ""

    def visible_tools(
        self, session: Session | None, names: Iterable[str]
    ) -> builtins.list[str]:
        """Filter the tool names offered to the model, keeping their order.

        Without a session nothing is filtered. In the default mode only
        ``exit_plan_mode`` is dropped. In a defined mode only allowlisted tools stay, and
        ``exit_plan_mode`` only in plan mode.
        """
        if session is None:
            return builtins.list(names)
        active = self.active_definition(session)
        if active is None:
            return [n for n in names if n != EXIT_PLAN_MODE]
        allowed = frozenset(active.tools)
        in_plan = active.name == PLAN_MODE
        return [n for n in names if n in allowed and (in_plan or n != EXIT_PLAN_MODE)]

    # --- the hard layer: what may run -----------------------------------------------------

    def deny_reason(self, session: Session | None, tool: str) -> str | None:
        """Why ``tool`` may not run now, or ``None`` when it may.

        Only the *logged* mode gates: a pending switch does not. Without a session, in
        the default mode, and for allowlisted tools, everything runs.
        """
        if session is None:
            return None
        active = self.active_definition(session)
        if active is None or tool in active.tools:
            return None
        if active.name == PLAN_MODE:
            return (
                f'tool "{tool}" is not available in plan mode; continue planning and '
                f"present your plan with {EXIT_PLAN_MODE} when ready"
            )
        return f'tool "{tool}" is not available in "{active.name}" mode'

    def gate(self, session: Session | None, tool: str) -> str | None:
        """The pre-execute gate: the error result text for a denied call, else ``None``.

        :returns: ``"Error: <reason>"`` (see :meth:`deny_reason`), the text a tool
            registry renders a denial as, or ``None`` when the call may run.
        """
        reason = self.deny_reason(session, tool)
        return None if reason is None else f"Error: {reason}"

    def __repr__(self) -> str:
        return f"<Modes {self.list()!r}>"


def _notice(session: Session, text: str) -> Event:
    data = {"content": [{"type": "text", "text": text}], "source": dict(_SOURCE)}
    return session.append("context/message", data, surface_op="append")
