"""The errors of durable stores.

Writer locks, writes, schema versions, store folders and URLs, and what a backend cannot
store.

Re-exported by :mod:`dsh_session_core.errors` (see :mod:`._errors.base`).
"""

from __future__ import annotations

from .base import DshSessionError, publish

__all__ = [
    "LinkedLogError",
    "MissingExtraError",
    "PersistenceError",
    "ReadOnlySessionError",
    "SchemaVersionError",
    "SessionIdError",
    "SessionLockedError",
    "SessionNotStoredError",
    "StoreFolderError",
    "StoreKindError",
    "StoreNotFoundError",
    "StoreUrlError",
    "StoreWriteError",
    "UnstorableError",
]


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


class SessionNotStoredError(PersistenceError, LookupError):
    """Nothing is stored under this id: ``open``, ``read``, ``delete``... of a session
    the store does not hold (never stored, or removed). A :class:`PersistenceError`, as
    it always was, and a :class:`LookupError`, as the read model's
    :class:`~dsh_session_core.errors.SessionNotFoundError` is (docs/decisions.md).

    Its message is the reference implementation's, ``session "ID" not found``, which
    code and tests of both implementations match; what to do about it (which ids are
    stored) is the note under it, in a traceback (:pep:`678`).

    :ivar session_id: the id looked for.
    :ivar location: the store it was looked for in, as ``--store`` names it (a plain
        JSONL store's folder, else the URL that opens it, without its password), when
        the raiser knows it (a backend does), else ``None``.
    """

    def __init__(self, session_id: str, *, location: str | None = None) -> None:
        super().__init__(f'session "{session_id}" not found', session_id=session_id)
        self.location = location
        where, store = ("", "URL") if location is None else (f" in {location}", location)
        self.add_note(
            f"nothing is stored under this id{where}: store.stored() lists the ids that "
            f"are (`dsh-session ls --store {store}` from the command line)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Made again from its id; its state (location, note) as it was.
        return (type(self), (self.session_id,), self.__dict__)


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
    """The database belongs to another schema version, which this build does not
    migrate (an older one it knows is migrated when opened).

    :ivar path: the database (a file, or a server URL without its password).
    :ivar version: its schema version (SQLite: ``user_version``, or the version of
        dsh-session's own tables, as the message then says).
    :ivar expected: the version this build reads and writes.
    """

    def __init__(
        self, path: str, version: int, *, expected: int = 4, detail: str | None = None
    ) -> None:
        super().__init__(
            f'session database at "{path}" has schema version {version}, incompatible '
            f"with this build ({expected}){'' if detail is None else ': ' + detail}"
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
        from .._base.url_for import url_for  # a leaf: urls imports this module

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


publish(globals(), __all__)
