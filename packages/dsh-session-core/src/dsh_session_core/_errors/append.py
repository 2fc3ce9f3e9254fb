"""The errors of a refused append: the payload, its type or its surface op does not fit.

Re-exported by :mod:`dsh_session_core.errors` (see :mod:`._errors.base`).
"""

from __future__ import annotations

from .base import DshSessionError, publish

__all__ = [
    "AppendError",
    "EventTypeError",
    "NotJsonError",
    "SchemaError",
    "SurfaceIntentError",
    "TooDeepError",
    "UnknownEventTypeError",
    "UnknownFieldError",
    "UnknownMemberError",
]


class AppendError(DshSessionError, ValueError):
    """An append was refused before anything changed: the log and its seq are untouched.

    :ivar event_type: the type the caller tried to append.
    :ivar seq: the seq the event would have had.
    """

    def __init__(self, message: str, *, event_type: str, seq: int) -> None:
        super().__init__(message)
        self.event_type = event_type
        self.seq = seq


class NotJsonError(AppendError):
    """The payload holds a value JSON cannot carry losslessly (NaN, a set, bytes, a cycle...).

    :ivar path: where the first bad value sits, as ``$.a[0].b``.
    """

    def __init__(self, message: str, *, event_type: str, seq: int, path: str) -> None:
        super().__init__(message, event_type=event_type, seq=seq)
        self.path = path


class TooDeepError(NotJsonError):
    """The payload nests arrays and objects deeper than
    :data:`~dsh_session_core.MAX_JSON_DEPTH` (``data`` itself is level 1), which no
    reader of the log would read back.

    :ivar path: the first array or object past the limit, as ``$.a[0].b``.
    :ivar limit: the limit.
    """

    def __init__(
        self, message: str, *, event_type: str, seq: int, path: str, limit: int
    ) -> None:
        super().__init__(message, event_type=event_type, seq=seq, path=path)
        self.limit = limit


class EventTypeError(AppendError):
    """The event type is not a string (a log line's ``type`` always is one).

    :ivar event_type: ``repr`` of the value given as the type.
    """


class SchemaError(AppendError):
    """The payload is JSON but does not match the schema registered for its type.

    :ivar path: the msgspec path of the mismatch, as ``$.content[0].text``.
    :ivar plugin: the plugin that registered the event type.
    """

    def __init__(
        self, message: str, *, event_type: str, seq: int, path: str, plugin: str
    ) -> None:
        super().__init__(message, event_type=event_type, seq=seq)
        self.path = path
        self.plugin = plugin


class UnknownFieldError(SchemaError):
    """A strict append met a key that no schema at its place declares (a typo such as
    ``toolName`` for ``callId``, or a key of another type), where a lenient store would
    have kept the payload verbatim as an opaque event.

    :ivar key: the unknown key.
    :ivar suggestion: the closest known key there, or ``None``.
    """

    def __init__(self, message: str, *, event_type: str, seq: int, path: str, plugin: str,
                 key: str, suggestion: str | None) -> None:
        super().__init__(message, event_type=event_type, seq=seq, path=path, plugin=plugin)
        self.key = key
        self.suggestion = suggestion


class UnknownMemberError(SchemaError):
    """A strict append met a member of a merge-extensible union that neither core nor
    an installed plugin declares (``{"type": "tool_call"}`` for ``"tool-call"``).

    :ivar family: the union (``"content-block"``, ``"turn-end-reason"``...).
    :ivar tag: the unknown tag.
    :ivar suggestion: the closest known tag of that union, or ``None``.
    """

    def __init__(self, message: str, *, event_type: str, seq: int, path: str, plugin: str,
                 family: str, tag: str, suggestion: str | None) -> None:
        super().__init__(message, event_type=event_type, seq=seq, path=path, plugin=plugin)
        self.family = family
        self.tag = tag
        self.suggestion = suggestion


class UnknownEventTypeError(EventTypeError):
    """A strict append of an event type no installed plugin declares.

    :ivar suggestion: the closest registered type, or ``None``.
    """

    def __init__(self, message: str, *, event_type: str, seq: int,
                 suggestion: str | None) -> None:
        super().__init__(message, event_type=event_type, seq=seq)
        self.suggestion = suggestion


class SurfaceIntentError(AppendError):
    """A surface op is missing on a surface type, present on another type, or names
    surface nodes that are not live, or not in order."""


publish(globals(), __all__)
