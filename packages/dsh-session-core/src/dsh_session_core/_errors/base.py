"""The root of the error hierarchy, and where every error says it lives.

Each group of errors has its own private module in this room (``append``, ``crypt``,
``inspect``, ``log``, ``plugin``, ``store``); :mod:`dsh_session_core.errors`, the public module,
re-exports them all. Every class states that public module as its ``__module__``, so its
repr, a traceback's last line and a pickle name ``dsh_session_core.errors.X`` whichever
private module defines it: the private modules may be regrouped in any release, the
public name is the one that lasts (docs/decisions.md).
"""

from __future__ import annotations

__all__ = ["HOME", "DshSessionError", "publish"]

#: The module every error names as its own.
HOME = "dsh_session_core.errors"


def publish(namespace: dict[str, object], names: list[str]) -> None:
    """Make each class ``names`` lists in ``namespace`` (a module's globals) name
    :data:`HOME` as its module."""
    for name in names:
        cls = namespace[name]
        if isinstance(cls, type):
            cls.__module__ = HOME


class DshSessionError(Exception):
    """Base of every error raised by dsh-session."""


publish(globals(), ["DshSessionError"])
