"""The ``mode/set`` event: which session mode is in force from this point of the log on.

The payload is a whole-value replace; nothing folds it but :func:`~dsh_session_mode.fold_mode`.
The mode name is not checked against any configuration when it is logged: a log may name
a mode the current deployment no longer defines (it then reads as the default mode).
"""

from __future__ import annotations

__all__ = ["ModeSet", "ModeSetData"]

from msgspec import Struct

from dsh_session_core import Event


class ModeSetData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``mode/set``: ``{"mode": <name>}``.

    :ivar mode: the mode name, verbatim (``"default"``, ``"plan"``, or any configured or
        formerly configured name).
    """

    mode: str


class ModeSet(Event, tag="mode/set", frozen=True):
    """The session mode in force from this point on: log-only, non-surface, whole-value
    replace — the last `mode/set` in the log wins (see `fold_mode()`). A log with none folds to
    DEFAULT_MODE.

    (The first paragraph is the reference catalog's doc line, word for word.) Appended by
    :class:`~dsh_session_mode.Modes` at a turn boundary (a user's switch) and by
    :func:`~dsh_session_mode.exit_plan_mode` on approval (in-turn).
    """

    data: ModeSetData
