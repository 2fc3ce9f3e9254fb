"""The errors of the read model (:mod:`dsh_session_core.inspect`).

A SOURCE, a store or a listing query it cannot answer.

Re-exported by :mod:`dsh_session_core.errors` (see :mod:`._errors.base`).
"""

from __future__ import annotations

from .base import DshSessionError, publish

__all__ = [
    "AmbiguousSessionError",
    "InspectError",
    "InspectUsageError",
    "SessionNotFoundError",
    "SourceReadError",
]


class InspectError(DshSessionError):
    """What the read model (:mod:`dsh_session_core.inspect`) cannot answer: a SOURCE, a
    store or a listing query. Its message is one line for a person; the CLI prints it
    with its hint, the viewer answers it with an HTTP status chosen by its class.

    :ivar message: the one line.
    :ivar hint: what to do about it, or ``None``.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InspectUsageError(InspectError, ValueError):
    """The read model was asked wrongly: a session id the store's rule refuses, a bad
    filter (``since`` after ``until``, a count below 0), a URL no backend opens, a
    SOURCE that names both a file and a stored session."""


class SessionNotFoundError(InspectError, LookupError):
    """No session of that id in the store (and, for a SOURCE, no file of that name).

    :ivar session_id: the id looked for.
    :ivar location: the store's URL.
    """

    def __init__(self, message: str, *, session_id: str, location: str,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.session_id = session_id
        self.location = location


class AmbiguousSessionError(SessionNotFoundError):
    """What names a session names more than one: a session name two sessions bear, or
    an id prefix (the command line's read commands take one, as git takes a short
    object id) that more than one id starts with. No session is picked.

    :ivar session_id: what was looked for (the name, or the prefix).
    :ivar location: the store's URL.
    :ivar candidates: the ids it could be, in order.
    """

    def __init__(self, message: str, *, session_id: str, location: str,
                 candidates: tuple[str, ...], hint: str | None = None) -> None:
        super().__init__(message, session_id=session_id, location=location, hint=hint)
        self.candidates = candidates


class SourceReadError(InspectError):
    """A log or a store that cannot be read: a file that is not there or is no
    dsh-session log, a log whose committed part is corrupt, a store that does not open.

    :ivar path: the file, when one is at fault (else ``None``).
    """

    def __init__(self, message: str, *, hint: str | None = None,
                 path: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path


publish(globals(), __all__)
