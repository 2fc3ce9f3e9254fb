"""The errors of a session and its log.

Seeding, folding the surface and the request header, forking, the dev invariants, and
reading a JSONL log file.

Re-exported by :mod:`dsh_session_core.errors` (see :mod:`._errors.base`).
"""

from __future__ import annotations

from .base import DshSessionError, publish
from .store import PersistenceError

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Literal, TypeAlias

    ForkErrorCode: TypeAlias = Literal[
        "SESSION_NOT_FOUND",
        "SESSION_NOT_LIVE",
        "SESSION_ALREADY_EXISTS",
        "INVALID_BOUNDARY",
        "OPEN_TURN",
    ]

__all__ = [
    "InvariantError",
    "LogFormatError",
    "MisplacedLogError",
    "RequestHeaderError",
    "SeedError",
    "SessionCwdError",
    "SessionExistsError",
    "SessionForkError",
    "SkippedLogWarning",
    "SurfaceError",
    "ToolPairingError",
    "UnreadableSessionWarning",
]


class SurfaceError(DshSessionError, ValueError):
    """A seeded (loaded) log holds a replace op that does not fit its surface.

    The reference accepts such a log and fails whenever its surface is read; so do we,
    with the same message, on every read.

    :ivar seq: the seq of the replace event.
    """

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class SeedError(DshSessionError, ValueError):
    """A seed log breaks a seeding rule (non-contiguous seq, non-JSON data, missing op).

    :ivar index: the index of the offending event in the seed.
    :ivar event_type: its type, when it has one.
    """

    def __init__(self, message: str, *, index: int, event_type: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.event_type = event_type


class SessionExistsError(PersistenceError, KeyError):
    """A session with this id already exists, and ``create`` made nothing: it is live in
    the store (``get`` returns it) or, in a durable store, stored (``open`` resumes it,
    ``open_or_create`` opens it or creates it). A :class:`PersistenceError` (what a
    durable store refuses), and a :class:`KeyError`, as it always was.

    :ivar session_id: the id that clashed.
    :ivar stored: whether it clashed with a stored session rather than a live one.
    """

    def __init__(self, session_id: str, *, stored: bool = False) -> None:
        message = f'session "{session_id}" already exists'
        if stored:
            message += (f" in this store: resume it with store.open({session_id!r}), or "
                        f"store.open_or_create({session_id!r}) to open it or create it; "
                        f"or choose another id")
        super().__init__(message, session_id=session_id)
        self.stored = stored

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class SessionCwdError(DshSessionError, ValueError):
    """A session cwd must be an absolute path with a UTF-8 form.

    :ivar cwd: the rejected value.
    :ivar problem: what is wrong with it, when it is not the reference's rule (an
        absolute path) that it breaks.
    """

    def __init__(self, cwd: str, problem: str | None = None) -> None:
        if problem is None:
            message = f'session cwd must be an absolute path, got "{cwd}"'
        else:
            message = f"session cwd {cwd!r} cannot be stored: {problem}"
        super().__init__(message)
        self.cwd = cwd
        self.problem = problem


class SessionForkError(DshSessionError):
    """A fork was refused. ``code`` says why, as the reference does.

    :ivar code: one of ``SESSION_NOT_FOUND``, ``SESSION_NOT_LIVE``,
        ``SESSION_ALREADY_EXISTS``, ``INVALID_BOUNDARY``, ``OPEN_TURN``.
    """

    def __init__(self, message: str, code: ForkErrorCode) -> None:
        super().__init__(message)
        self.code: ForkErrorCode = code


class RequestHeaderError(DshSessionError, ValueError):
    """A ``request/header-delta`` came before any ``request/header`` snapshot.

    :ivar seq: the seq of the orphan delta.
    """

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class ToolPairingError(DshSessionError, ValueError):
    """The surface holds a ``tool/result`` with no tool call before it.

    :ivar seq: the seq of the unmatched result.
    """

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class InvariantError(DshSessionError):
    """The opt-in dev invariants plugin saw an event that breaks turn enclosure or
    provenance. The event is already in the log (the check runs as a listener).

    :ivar detail: what was violated, without the ``invariant violated:`` prefix.
    """

    code = "INVARIANT"

    def __init__(self, detail: str) -> None:
        super().__init__(f"invariant violated: {detail}")
        self.detail = detail


class LogFormatError(DshSessionError, ValueError):
    """A JSONL log cannot be read.

    :ivar path: the file, when the log came from one.
    :ivar line: the 1-based line number in the file, when one line is to blame.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class MisplacedLogError(LogFormatError):
    """A JSONL log file whose header names another session (or another cwd bucket) than
    its file name and folder: a renamed or moved file. Writing it would write another
    file, and listing it would list a session no ``open`` finds, so both refuse.

    :ivar path: the file.
    :ivar session_id: the id its header holds.
    :ivar expected: where a log of that header lives (move the file there).
    """

    def __init__(self, path: str, session_id: str, expected: str) -> None:
        super().__init__(
            f'the log {path} holds session "{session_id}" (its header), but a log of that '
            f"session lives at {expected}: a renamed or moved file? Move it back "
            f"(mv {path} {expected}), or remove it from the store",
            path=path,
            line=1,
        )
        self.session_id = session_id
        self.expected = expected


class SkippedLogWarning(UserWarning):
    """A file in a JSONL store that a listing (``stored()``, ``summaries()``, ``ls``,
    ``copy``) left out: a log whose header names another session than its file (see
    :class:`MisplacedLogError`), or whose first line is not a header. One bad file must
    not hide the rest of the store, so it is skipped, but never silently: the warning
    names the file and what to do. ``open`` of that session still refuses with the error.

    :ivar path: the file.
    :ivar reason: why it was left out, with the fix.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path} left out of the listing: {reason}")
        self.path = path
        self.reason = reason



class UnreadableSessionWarning(UserWarning):
    """A session a read of many (the ADK adapter's ``list_sessions``) left out because
    it could not be read: its key is not in the keyring (never given, or deleted: a
    crypto-shredded session), a record fails its authentication, or a record does not
    read. One session must not take the others down, so it is left out, but never
    silently: the warning names it and carries the error, which says what to do.

    :ivar session_id: the session left out.
    :ivar error: why it could not be read.
    """

    def __init__(self, session_id: str, error: DshSessionError) -> None:
        super().__init__(f'session "{session_id}" left out, it could not be read: {error}')
        self.session_id = session_id
        self.error = error


publish(globals(), __all__)
