"""What the path of a built-in store URL is, and where a store may be created.

The rule is SQLAlchemy's (docs/decisions.md, "Store URLs"), for ``sqlite:``, ``jsonl:``
and ``jsonl+zstd:`` alike:

- ``scheme:///name`` is ``name`` relative to the working folder, and
  ``scheme:////abs/name`` the absolute ``/abs/name``: after ``scheme://`` comes an
  (empty) host, then ``/``, then the path, percent-escapes decoded (``%20`` is a space,
  ``%25`` a ``%``);
- ``scheme:path`` (no ``//``) is ``path`` exactly as written, relative or absolute;
- ``sqlite://`` and ``sqlite::memory:`` are an in-memory database, as in SQLAlchemy.

``file:`` URLs are RFC 8089's: ``file:///abs`` (or ``file:/abs``,
``file://localhost/abs``) is the absolute ``/abs``.

Which URLs and paths name a store at all is decided here, for the library and the
command line alike (:func:`store_target`, :func:`check_plain_path`,
:func:`driver_error`): a URL is a ``str`` or a path-like, never empty; a plain path
names a JSONL store's folder, so one that names a SQLite database (an existing SQLite
file, or a new store named ``*.db``, ``*.sqlite``...) is refused with its ``sqlite:``
URL, while an existing folder opens whatever its name.

A store is created (a SQLite file, a JSONL store's folder) only in a folder that exists:
:func:`check_folder`. The default store (:func:`default_store_url`) and how a URL is
shown in messages (:func:`printable_url`) are here too. Nothing here touches a backend
(which URL opens which backend is :mod:`.opening`): a backend's module may import this
one without a cycle.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Final

from .._base.url_for import url_for  # re-exported: the URL rules' own
from ..errors import StoreFolderError, StoreUrlError

__all__ = [
    "DATABASE_SUFFIXES",
    "STORE_ENV",
    "StorePlace",
    "check_folder",
    "check_plain_path",
    "data_folder_store",
    "default_store_url",
    "driver_error",
    "is_plain_path",
    "is_sqlite_file",
    "local_store",
    "printable_url",
    "store_path",
    "store_place",
    "store_target",
    "url_for",
]

#: Where ``open_store()`` stores by default: a URL or a folder path.
STORE_ENV = "DSH_SESSION_STORE"


#: How the names of SQLite databases end: a plain path so named that is not a folder
#: yet names a database, not a new JSONL store's folder.
DATABASE_SUFFIXES: Final = (".db", ".db3", ".sqlite", ".sqlite3")
#: The schemes of SQLAlchemy URLs naming a driver (``sqlite+aiosqlite``), by the
#: scheme dsh-session takes instead.
_DRIVER_SCHEMES: Final = {"sqlite": "sqlite", "postgresql": "postgresql",
                          "postgres": "postgresql"}


def store_target(url: object, what: str = "open_store()") -> str:
    """The store URL ``url`` names, checked: ``None`` is the embedded default
    (:func:`default_store_url`); a ``str`` or a path-like of one is taken as it is.

    :param what: the function or option that takes it, for the messages.
    :raises TypeError: ``url`` is neither (``bytes``, a number...).
    :raises StoreUrlError: it is empty.
    """
    if url is None:
        return default_store_url()
    target = os.fspath(url) if isinstance(url, os.PathLike) else url
    if not isinstance(target, str):
        from .._model.builders import kind_of

        msg = (f"{what} takes a store URL or a folder path, a str or an os.PathLike of "
               f"one (or None, for the default store); got {kind_of(target)}")
        raise TypeError(msg)
    if not target:
        raise StoreUrlError(target, "names no store", "give a folder path or a store URL "
                            "(sqlite:///name.db...), or none at all for the default "
                            "store ($DSH_SESSION_STORE, else the user's data folder)")
    return target


def is_plain_path(url: str) -> bool:
    """Whether a store URL is a plain path (a JSONL store's folder), not ``scheme:...``
    (a drive letter, ``C:``, is a path)."""
    scheme, sep, _ = url.partition(":")
    return not sep or len(scheme) == 1


def is_sqlite_file(path: str) -> bool:
    """Whether ``path`` is a SQLite database (its magic header): a store named by its
    path instead of its ``sqlite:`` URL, never a log nor a folder."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def check_plain_path(path: str) -> None:
    """Refuse a plain path (a JSONL store's folder, :func:`is_plain_path`) that names a
    SQLite database: an existing SQLite file, or, when no folder is there yet, a name
    ending in one of :data:`DATABASE_SUFFIXES` (``open_store("agent.db")``, as
    ``SQLiteSession("id", "agent.db")`` is written, would make a JSONL folder named
    ``agent.db``). A folder that exists opens whatever its name: stores made so before
    stay readable.

    :raises StoreUrlError: naming the ``sqlite:`` URL to use (and the ``jsonl:`` one,
        for a JSONL folder of that name).
    """
    if os.path.isdir(path):
        return
    sqlite = url_for("sqlite", path)  # the path as given: relative stays relative
    if is_sqlite_file(path):
        raise StoreUrlError(path, "is a SQLite database, and a plain path names a JSONL "
                                  "store's folder", f"open it by its URL: {sqlite}")
    if path.lower().endswith(DATABASE_SUFFIXES):
        raise StoreUrlError(
            path, "names a new store with a database's name, and a plain path names a "
                  "JSONL store's folder",
            f"for a SQLite database, use its URL: {sqlite}; for a new JSONL store of that "
            f"name, {url_for('jsonl', path)} (a JSONL folder of that name that exists "
            f"opens as it is)")


def driver_error(url: str) -> StoreUrlError | None:
    """The error for a SQLAlchemy URL naming a driver (``sqlite+aiosqlite:///x.db``,
    ``postgresql+asyncpg://...``, as ADK and SQLAlchemy users paste them): dsh-session
    picks its own driver, so the URL without ``+driver`` opens the store. ``None`` for
    any other URL. The URL is shown without its password (:func:`printable_url`)."""
    scheme, _, _ = url.partition(":")
    base, plus, driver = scheme.partition("+")
    ours = _DRIVER_SCHEMES.get(base.lower())
    if not plus or ours is None:
        return None
    shown = printable_url(url)
    return StoreUrlError(shown, f"names the driver {driver!r}, and dsh-session picks its "
                                f"own ({'sqlite3' if ours == 'sqlite' else 'psycopg 3'})",
                         f"drop it: {ours}:{shown.partition(':')[2]}")


def local_store(url: str) -> tuple[str, str] | None:
    """What a store URL of a local built-in kind names: ``("sqlite", path)`` (the path
    ``":memory:"`` for an in-memory database), ``("jsonl", folder)`` or
    ``("jsonl+zstd", folder)``; ``None`` for any other scheme (``memory:``, PostgreSQL,
    a plugin's). A plain path (or one with a Windows drive letter) is a JSONL folder.

    :raises StoreUrlError: a host, URL options, a relative ``file:`` URL, or a JSONL URL
        without a folder.
    """
    scheme, _, rest = url.partition(":")
    if is_plain_path(url):
        return "jsonl", url
    if scheme not in ("sqlite", "jsonl", "file", "jsonl+zstd"):
        return None
    path = store_path(scheme, rest, url)
    if scheme == "sqlite":
        return "sqlite", path or ":memory:"
    if not path:
        raise StoreUrlError(url, "names no folder",
                            f"{scheme}:///folder (relative to the working folder) or "
                            f"{scheme}:////abs/folder")
    return ("jsonl+zstd" if scheme == "jsonl+zstd" else "jsonl"), path


def store_path(scheme: str, rest: str, url: str) -> str:
    """The path a ``sqlite:``, ``jsonl:``, ``jsonl+zstd:`` or ``file:`` URL names
    (``rest``: what follows ``scheme:``); ``""`` for none (``sqlite://``).

    :raises StoreUrlError: a host, URL options, or a relative ``file:`` URL.
    """
    from urllib.parse import unquote

    if not rest.startswith("//"):  # the short form: the path as written
        if scheme == "file" and not rest.startswith("/"):
            raise StoreUrlError(url, "is relative, and a file: URL names an absolute path "
                                     "(RFC 8089)",
                                f"use file:///abs/folder, or jsonl:{rest} for a folder "
                                f"relative to the working folder")
        return rest
    host, _, tail = rest[2:].partition("/")
    if host and not (scheme == "file" and host == "localhost"):
        example = f"{scheme}:////abs/name" if scheme != "file" else "file:///abs/folder"
        raise StoreUrlError(url, f"names the host {host!r}, and a {scheme}: store is a "
                                 "local path",
                            f"three slashes and a relative path ({scheme}:///name), or "
                            f"four and an absolute one ({example})")
    path, query, _ = tail.partition("?")
    if query:
        raise StoreUrlError(url, "has options (?...), and a dsh-session store takes none",
                            "drop them (a ? in a path is written %3F)")
    try:
        path = unquote(path, errors="strict")
    except UnicodeDecodeError:
        raise StoreUrlError(url, "has a percent-escape that is not UTF-8",
                            "escape the path's UTF-8 bytes (%C3%A9 for é)") from None
    if scheme == "file":  # RFC 8089: the path after the authority is absolute
        return "/" + path.lstrip("/")
    return path


def data_folder_store() -> str:
    """The embedded default store: ``sessions`` in dsh-session's folder of the user's
    data directory (``$XDG_DATA_HOME``, else ``~/.local/share``)."""
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data) / "dsh-session" / "sessions")


def check_folder(path: str) -> None:
    """Refuse to create a store at ``path`` (absolute) when the folder it would be
    created in is missing, or is no folder; the embedded default's folders are ours to
    make (:func:`make_store_folder` makes them).

    :raises StoreFolderError: the folder is missing.
    """
    parent = os.path.dirname(path)
    if not os.path.isdir(parent) and path != os.path.abspath(data_folder_store()):
        raise StoreFolderError(path, parent)


def default_store_url() -> str:
    """The embedded default: ``$DSH_SESSION_STORE``, else a JSONL folder in the user's
    data directory."""
    configured = os.environ.get(STORE_ENV)
    if configured:
        return configured
    return data_folder_store()


def printable_url(url: str) -> str:
    """A store URL for messages: without the password of a ``scheme://user:password@``
    URL, or of a ``password=`` query parameter; any other URL exactly as given."""
    if "://" not in url:
        return url
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    query = parse_qsl(parts.query, keep_blank_values=True)
    secret_query = any(k == "password" for k, _ in query)
    if not (at and ":" in user) and not secret_query:
        return url  # nothing to hide: never respelt
    name = user.partition(":")[0]  # none: a password alone (Redis's default user)
    netloc = (f"{name}@{host}" if name else host) if at else parts.netloc
    if secret_query:
        parts = parts._replace(query=urlencode([(k, v) for k, v in query if k != "password"]))
    return urlunsplit(parts._replace(netloc=netloc))


@dataclasses.dataclass(frozen=True, slots=True)
class StorePlace:
    """Where a store URL keeps its sessions, for people (:func:`store_place`).

    :ivar kind: the kind of store: ``"jsonl"``, ``"jsonl+zstd"``, ``"sqlite"``,
        ``"postgresql"``, ``"redis"``, ``"memory"``, or a plugin's scheme.
    :ivar where: its folder or database file (absolute), its server URL without the
        password, or the URL as given (``memory:``, a plugin's).
    :ivar log_files: whether each session is a file of its own (JSONL: the store's
        ``location(id)`` is that file), rather than rows of a database.

    Whether a store lives in its process only (``memory:``, ``sqlite::memory:``) is the
    backend's to say, whatever its URL: :meth:`~.base.Backend.store_identity` is
    ``None``.
    """

    kind: str
    where: str
    log_files: bool = False


def store_place(url: str | os.PathLike[str] | None = None) -> StorePlace:
    """Where the store ``url`` names keeps its sessions (``None``: the embedded
    default, :func:`default_store_url`), by the URL rules alone: nothing is opened.

    :raises StoreUrlError: a URL of a built-in scheme with a host or options.
    """
    target = store_target(url, "store_place()")
    scheme = target.partition(":")[0]
    if scheme == "memory":
        return StorePlace("memory", target)
    if scheme in ("postgresql", "postgres"):
        return StorePlace("postgresql", printable_url(target))
    if scheme in ("redis", "rediss"):
        return StorePlace("redis", printable_url(target))
    local = local_store(target)
    if local is None:  # a plugin's scheme: only the URL is known here
        return StorePlace(scheme, printable_url(target))
    kind, path = local
    if kind == "sqlite":
        return StorePlace("sqlite", path if path == ":memory:" else os.path.abspath(path))
    return StorePlace(kind, os.path.abspath(path), log_files=True)

