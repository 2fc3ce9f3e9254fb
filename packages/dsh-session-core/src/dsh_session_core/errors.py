"""Every error dsh-session raises, as one hierarchy.

Each error carries the data a caller needs to act on it (event type, seq, plugin, path)
as attributes, and its message says what went wrong and what to do about it::

    DshSessionError
    ├── AppendError (ValueError)           an append was refused; the log is untouched
    │   ├── NotJsonError                   the payload is not a lossless JSON value
    │   │   └── TooDeepError               it nests deeper than the log format's limit
    │   ├── EventTypeError                 the event type is not a string
    │   ├── SchemaError                    the payload does not match its registered schema
    │   └── SurfaceIntentError             missing, misplaced or invalid surface op
    ├── SurfaceError (ValueError)          the surface of a seeded log cannot be folded
    ├── SeedError (ValueError)             a seed log breaks the seeding rules
    ├── SessionExistsError (KeyError)      a session id is already live in the store
    ├── SessionCwdError (ValueError)       a session cwd is not an absolute path
    ├── SessionForkError                   a fork was refused (with a ``code``)
    ├── RequestHeaderError (ValueError)    the request-header fold met a corrupt log
    ├── ToolPairingError (ValueError)      the surface holds a result with no call
    ├── InvariantError                     the opt-in dev invariants saw a violation
    ├── LogFormatError (ValueError)        a JSONL log file cannot be read
    │   └── MisplacedLogError              a log's header names another session than its file
    ├── PersistenceError                   a durable store refused (collision, seq mismatch)
    │   ├── StoreWriteError (OSError)      a durable write failed (names the session, the log)
    │   └── LinkedLogError                 a write would follow a symbolic link out of a store
    ├── SessionLockedError                 another writer holds the session's writer lock
    ├── ReadOnlySessionError               an append to a session read with read_session
    ├── SchemaVersionError (RuntimeError)  a SQLite database of another schema version
    ├── StoreKindError                     a JSONL store folder opened as the other kind
    ├── StoreFolderError (FileNotFoundError)  a store whose folder does not exist
    ├── StoreUrlError (ValueError)         a store URL that names no store dsh-session opens
    ├── MissingExtraError (ImportError)    a feature needs an extra that is not installed
    ├── InspectError                       the read model cannot answer (a message and a hint)
    │   ├── InspectUsageError (ValueError) it was asked wrongly: a bad id, filter or URL
    │   ├── SessionNotFoundError (LookupError)  no such session (and no such file)
    │   └── SourceReadError                a log or a store that cannot be read
    ├── UnstorableError (ValueError)       a value the SQLite schema cannot store losslessly
    │   └── SessionIdError                 a session id the backend's id rule refuses
    └── PluginError
        ├── PluginConflictError (RuntimeError)   two distributions use one entry-point name
        └── DuplicateEventTypeError (ValueError) two plugins declare one event type

Messages quoting the reference implementation keep its exact wording (tests match on
them), so that a log rejected by one implementation is rejected for the same reason by
the other.
"""

from __future__ import annotations

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

__all__ = [
    "AppendError",
    "DshSessionError",
    "DuplicateEventTypeError",
    "DuplicateUnionMemberError",
    "EventTypeError",
    "InspectError",
    "InspectUsageError",
    "InvariantError",
    "LinkedLogError",
    "LogFormatError",
    "MisplacedLogError",
    "MissingExtraError",
    "NotJsonError",
    "PersistenceError",
    "PluginConflictError",
    "PluginError",
    "ReadOnlySessionError",
    "RequestHeaderError",
    "SchemaError",
    "SchemaVersionError",
    "SeedError",
    "SessionCwdError",
    "SessionExistsError",
    "SessionForkError",
    "SessionIdError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SkippedLogWarning",
    "SourceReadError",
    "StoreFolderError",
    "StoreKindError",
    "StoreNotFoundError",
    "StoreUrlError",
    "StoreWriteError",
    "SurfaceError",
    "SurfaceIntentError",
    "TooDeepError",
    "ToolPairingError",
    "UnknownEventTypeError",
    "UnknownFieldError",
    "UnknownMemberError",
    "UnknownPluginWarning",
    "UnstorableError",
]

if TYPE_CHECKING:
    from typing import Literal, TypeAlias

    ForkErrorCode: TypeAlias = Literal[
        "SESSION_NOT_FOUND",
        "SESSION_NOT_LIVE",
        "SESSION_ALREADY_EXISTS",
        "INVALID_BOUNDARY",
        "OPEN_TURN",
    ]


class DshSessionError(Exception):
    """Base of every error raised by dsh-session."""


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


class SessionExistsError(DshSessionError, KeyError):
    """A session with this id is already live in the store; pick another id or ``get`` it.

    :ivar session_id: the id that clashed.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(f'session "{session_id}" already exists')
        self.session_id = session_id

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


class UnknownPluginWarning(UserWarning):
    """A name in ``DSH_SESSION_DISABLE_PLUGINS`` that no installed plugin has (a typo
    would otherwise leave the plugin it meant loaded, silently). Warned once per name.

    :ivar name: the name.
    :ivar installed: the names of the installed plugins.
    """

    def __init__(self, name: str, installed: tuple[str, ...]) -> None:
        known = ", ".join(installed) if installed else "none"
        super().__init__(
            f"DSH_SESSION_DISABLE_PLUGINS names {name!r}, which no installed plugin is "
            f"(installed: {known}): check the spelling (`dsh-session plugins` lists them)"
        )
        self.name = name
        self.installed = installed


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


class PluginError(DshSessionError):
    """A plugin could not be loaded or registered."""


class PluginConflictError(PluginError, RuntimeError):
    """Two installed distributions use the same entry-point name in ``dsh_session.plugins``.

    :ivar name: the entry-point name.
    :ivar distributions: the distributions that both claim it.
    """

    def __init__(self, name: str, distributions: tuple[str, ...]) -> None:
        dists = " and ".join(repr(d) for d in distributions)
        super().__init__(
            f"plugin name {name!r} is claimed by {dists}; uninstall one of them, or block "
            f"the name with DSH_SESSION_DISABLE_PLUGINS={name}"
        )
        self.name = name
        self.distributions = distributions


class DuplicateEventTypeError(PluginError, ValueError):
    """Two plugins declare the same event type.

    :ivar event_type: the contested type string.
    :ivar plugins: the two plugins, the first registrant first.
    """

    def __init__(self, event_type: str, plugins: tuple[str, str]) -> None:
        super().__init__(
            f"event type {event_type!r} is declared by both plugin {plugins[0]!r} and plugin "
            f"{plugins[1]!r}; block one of them with DSH_SESSION_DISABLE_PLUGINS"
        )
        self.event_type = event_type
        self.plugins = plugins


class DuplicateUnionMemberError(PluginError, ValueError):
    """Two plugins (or a plugin and core) declare the same member of a union.

    :ivar family: the union (``"content-block"``...).
    :ivar tag: the contested tag.
    :ivar plugins: the two owners, the first registrant first (``"core"`` for core).
    """

    def __init__(self, family: str, tag: str, plugins: tuple[str, str]) -> None:
        first = "core" if plugins[0] == "core" else f"plugin {plugins[0]!r}"
        super().__init__(
            f"{family} member {tag!r} is declared by both {first} and plugin {plugins[1]!r}; "
            f"rename one tag, or block one plugin with DSH_SESSION_DISABLE_PLUGINS"
        )
        self.family = family
        self.tag = tag
        self.plugins = plugins


# --- persistence ------------------------------------------------------------------------


class SessionLockedError(DshSessionError):
    """Another writer (usually another process) holds this session's writer lock.

    :ivar session_id: the session.
    :ivar holder: what is known of the holder (a lock path, a pid), for the message.
    """

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(
            f'session "{session_id}" is being written by another writer ({holder}); '
            f"only one writer per session is allowed: stop the other writer, or read it "
            f"without writing: store.read_session({session_id!r}) (no lock taken), or "
            f"`dsh-session show {session_id}` (or tail, export) from the command line"
        )
        self.session_id = session_id
        self.holder = holder


class ReadOnlySessionError(DshSessionError):
    """An append (or a builder: ``turn``, ``inject``) on a session read with
    ``store.read_session(id)``: such a session holds no writer lock, so it never writes.
    Nothing changed.

    :ivar session_id: the session.
    :ivar event_type: the type of the refused event (``None`` for a builder call).
    """

    def __init__(self, session_id: str, event_type: str | None = None) -> None:
        what = f"append {event_type}" if event_type is not None else "start a turn"
        super().__init__(
            f'session "{session_id}" was read with store.read_session(), which takes no '
            f"writer lock, so it cannot {what}: to write it, open it with "
            f"store.open({session_id!r}) (one writer at a time)"
        )
        self.session_id = session_id
        self.event_type = event_type


class PersistenceError(DshSessionError):
    """A persistence operation was refused (collision, seq mismatch, unknown session...).

    :ivar session_id: the session concerned.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class StoreWriteError(PersistenceError, OSError):
    """A durable write failed (a flush, a first write, a crash repair): the system call's
    error, naming the session and its log. It is an :class:`OSError` with the cause's
    ``errno``, ``strerror`` and ``args``, so code catching ``OSError`` still catches it;
    the cause is its ``__cause__``.

    Nothing of the failed batch is acknowledged: the events stay buffered, and a retry
    writes them once.

    :ivar session_id: the session.
    :ivar path: where its log lives (the backend's ``location``).
    """

    def __init__(self, session_id: str, path: str, cause: OSError, *, action: str,
                 left: str | None = None) -> None:
        """:param left: what the failure left, when it is not the log as of its last
            durable event (a failed batch no reader can tell from history)."""
        OSError.__init__(self, *cause.args)
        self.filename = cause.filename
        self.session_id = session_id
        self.path = path
        where = path
        if cause.filename is not None and str(cause.filename) != path:
            where = f"{path} (at {cause.filename})"
        notes = "".join(f"; {note}" for note in getattr(cause, "__notes__", ()))
        self._message = (
            f'{action} session "{session_id}" at {where} failed: {cause}{notes}. Nothing of '
            f"it is acknowledged (buffered events stay buffered): fix the cause (disk space, "
            f"permissions, the device), then try again, e.g. flush again (the events are "
            f"written once); {left or 'the log loads as of its last durable event'}"
        )

    def __str__(self) -> str:
        return self._message


class LinkedLogError(PersistenceError):
    """A write would go through a symbolic link: a session's log, its lock file or its
    bucket folder is a link (perhaps out of the store). dsh-session never writes
    through one, so that a log planted as a link cannot make it append to another file.

    :ivar session_id: the session.
    :ivar path: the link.
    :ivar target: where it points (``None`` when it cannot be read).
    """

    def __init__(self, session_id: str, path: str, target: str | None) -> None:
        to = f" to {target}" if target is not None else ""
        super().__init__(
            f'refusing to write session "{session_id}" through the symbolic link {path}{to}: '
            f"replace the link with the file itself (move the file into the store), or "
            f"open the store the file lives in",
            session_id=session_id,
        )
        self.path = path
        self.target = target


class SchemaVersionError(DshSessionError, RuntimeError):
    """The database belongs to another schema version; there is no migration.

    :ivar path: the database (a file, or a server URL without its password).
    :ivar version: its schema version (SQLite: ``user_version``).
    :ivar expected: the version this build reads and writes.
    """

    def __init__(self, path: str, version: int, *, expected: int = 4) -> None:
        super().__init__(
            f'session database at "{path}" has schema version {version}, incompatible '
            f"with this build ({expected})"
        )
        self.path = path
        self.version = version
        self.expected = expected


class StoreNotFoundError(DshSessionError, LookupError):
    """A store opened for reading only does not exist (opening it to write would have
    created it).

    :ivar location: where it was looked for (a database URL without its password).
    """

    def __init__(self, location: str, detail: str) -> None:
        super().__init__(f"no dsh-session store at {location} ({detail})")
        self.location = location


class StoreKindError(DshSessionError):
    """A JSONL store folder opened as the other kind: a compact store (``jsonl+zstd:``,
    its logs zstd frames) as a plain one, or a plain store (the reference's logs) as a
    compact one. A folder holds one kind of log; ``dsh-session copy`` converts a store.

    :ivar location: the folder.
    :ivar kind: what it holds: ``"compact"`` or ``"plain"``.
    """

    def __init__(self, location: str, kind: str) -> None:
        from ._persistence.urls import url_for  # here: urls imports this module

        scheme, other = ("jsonl+zstd", "plain") if kind == "compact" else ("jsonl", "compact")
        # The URL that opens it, by the store URL rule (an absolute location gets the
        # four slashes of an absolute path).
        url = url_for(scheme, location)
        super().__init__(
            f"{location} is a {kind} JSONL store, not a {other} one: open it as "
            f"{url}, or copy it into a new {other} store (dsh-session copy)"
        )
        self.location = location
        self.kind = kind


class StoreFolderError(DshSessionError, FileNotFoundError):
    """A store cannot be created: the folder it would be created in does not exist (or
    is not a folder). dsh-session creates a store (a SQLite file, a JSONL store's folder),
    never the folders above it, so that a mistyped path or URL (``sqlite:///x.db`` is
    ``x.db`` in the working folder, ``sqlite:////x.db`` is ``/x.db``) cannot write
    anywhere else. It is a :class:`FileNotFoundError`, so code catching ``OSError`` still
    catches it.

    :ivar path: the store that was to be created (absolute).
    :ivar folder: the folder that does not exist (``filename``, as for ``OSError``).
    """

    def __init__(self, path: str, folder: str) -> None:
        import errno

        OSError.__init__(self, errno.ENOENT, "No such directory", folder)
        self.path = path
        self.folder = folder
        self._message = (
            f"cannot create the store {path}: its folder {folder} does not exist "
            f"(dsh-session creates a store, never the folders above it): create the "
            f"folder first, or fix the path (in a URL, sqlite:///name.db and "
            f"jsonl:///name are relative to the working folder, sqlite:////abs/name.db "
            f"and jsonl:////abs/name absolute)"
        )

    def __str__(self) -> str:
        return self._message


class StoreUrlError(DshSessionError, ValueError):
    """A store URL of a built-in scheme that names no store dsh-session can open: a
    host in a ``sqlite:`` or ``jsonl:`` URL, URL options (``?...``), a JSONL URL
    without a path, a relative ``file:`` URL. (A scheme that neither core nor a plugin
    knows is a plain :class:`ValueError`.)

    :ivar url: the URL, as given.
    :ivar problem: what is wrong with it.
    """

    def __init__(self, url: str, problem: str, fix: str) -> None:
        super().__init__(f"store URL {url!r} {problem}: {fix}")
        self.url = url
        self.problem = problem


class MissingExtraError(DshSessionError, ImportError):
    """A feature needs an optional dependency that is not installed (an extra of a
    distribution): the message says what to install.

    :ivar name: the missing module (as :class:`ImportError` names it).
    :ivar requirement: what ``pip install`` needs, e.g. ``dsh-session-core[zstd]``.
    """

    def __init__(self, feature: str, module: str, requirement: str) -> None:
        super().__init__(
            f"{feature} needs {module}, which is not installed: pip install '{requirement}'",
            name=module,
        )
        self.requirement = requirement


class UnstorableError(DshSessionError, ValueError):
    """An event or a header holds a value the SQLite schema cannot store losslessly
    (nothing of its batch was written).

    :ivar session_id: the session.
    :ivar seq: the event's seq, or ``None`` when the header is to blame.
    """

    def __init__(self, message: str, *, session_id: str, seq: int | None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.seq = seq


class SessionIdError(UnstorableError):
    """A session id that a backend's id rule refuses: raised by ``create`` before
    anything is written (and reported by ``copy`` for a session its destination cannot
    hold). Every backend refuses the empty id and an id with a lone surrogate (it has no
    UTF-8 form); a backend may have limits of its own (PostgreSQL: no NUL character, at
    most 2048 UTF-8 bytes).

    :ivar session_id: the id.
    :ivar backend: the backend's label (``Backend.name``).
    :ivar problem: what is wrong with the id.
    :ivar rule: the backend's whole id rule, as the message states it.
    """

    def __init__(self, session_id: str, *, backend: str, problem: str, rule: str) -> None:
        shown = repr(session_id)
        if len(shown) > 60:
            shown = f"{shown[:40]}...{shown[-12:]} ({len(session_id)} characters)"
        super().__init__(
            f"the session id {shown} cannot be stored by the {backend} backend: {problem}; "
            f"its session ids are {rule}: choose another id",
            session_id=session_id,
            seq=None,
        )
        self.backend = backend
        self.problem = problem
        self.rule = rule


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


class SourceReadError(InspectError):
    """A log or a store that cannot be read: a file that is not there or is no
    dsh-session log, a log whose committed part is corrupt, a store that does not open.

    :ivar path: the file, when one is at fault (else ``None``).
    """

    def __init__(self, message: str, *, hint: str | None = None,
                 path: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path
