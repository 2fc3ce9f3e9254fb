"""The errors of the ``mode`` plugin, under core's :class:`DshSessionError` root::

    DshSessionError
    ├── ModeConfigError (ValueError)   the mode configuration is malformed
    └── UnknownModeError (ValueError)  ``Modes.set`` was asked for a mode nobody defines
"""

from __future__ import annotations

__all__ = ["ModeConfigError", "UnknownModeError"]

from dsh_session_core.errors import DshSessionError


class ModeConfigError(DshSessionError, ValueError):
    """The mode configuration is malformed; the message is the reference's, word for word.

    :ivar mode: the offending mode name, when one is to blame.
    """

    def __init__(self, message: str, *, mode: str | None = None) -> None:
        super().__init__(message)
        self.mode = mode


class UnknownModeError(DshSessionError, ValueError):
    """A switch to a mode that is neither ``default`` nor configured.

    :ivar mode: the requested name.
    :ivar available: the names that would have been accepted, ``default`` first.
    """

    def __init__(self, mode: str, available: tuple[str, ...]) -> None:
        super().__init__(f'unknown mode "{mode}" — available modes: {", ".join(available)}')
        self.mode = mode
        self.available = available
