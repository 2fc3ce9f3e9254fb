"""The errors of the ``hooks`` plugin, under core's :class:`DshSessionError` root::

    DshSessionError
    └── HookArgumentError (ValueError)   a hook-protocol helper got a value it cannot use
"""

from __future__ import annotations

__all__ = ["HookArgumentError"]

from dsh_session_core.errors import DshSessionError


class HookArgumentError(DshSessionError, ValueError):
    """A hook-protocol helper was called with a value it cannot use; nothing was appended.

    :ivar argument: the parameter's name.
    :ivar value: the rejected value.
    """

    def __init__(self, *, argument: str, value: object, requirement: str) -> None:
        super().__init__(f"`{argument}` must be {requirement}, got {value!r}")
        self.argument = argument
        self.value = value
