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

A store is created (a SQLite file, a JSONL store's folder) only in a folder that exists:
:func:`check_folder`. Nothing here touches a backend.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import StoreFolderError, StoreUrlError

__all__ = [
    "check_folder",
    "data_folder_store",
    "local_store",
    "make_store_folder",
    "store_path",
    "url_for",
]

#: What :func:`url_for` leaves unescaped: every character but ``%``, ``?`` and ``#``.
_SAFE = "/:@!$&'()*+,;=[]~"


def local_store(url: str) -> tuple[str, str] | None:
    """What a store URL of a local built-in kind names: ``("sqlite", path)`` (the path
    ``":memory:"`` for an in-memory database), ``("jsonl", folder)`` or
    ``("jsonl+zstd", folder)``; ``None`` for any other scheme (``memory:``, PostgreSQL,
    a plugin's). A plain path (or one with a Windows drive letter) is a JSONL folder.

    :raises StoreUrlError: a host, URL options, a relative ``file:`` URL, or a JSONL URL
        without a folder.
    """
    scheme, sep, rest = url.partition(":")
    if not sep or len(scheme) == 1:
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


def url_for(scheme: str, path: str) -> str:
    """The URL of ``scheme`` that names ``path`` (relative paths stay relative):
    ``url_for("sqlite", "backup.db")`` is ``sqlite:///backup.db``, and an absolute path
    gets the four slashes. Only ``%``, ``?``, ``#`` (and the like) are escaped."""
    from urllib.parse import quote

    return f"{scheme}:///{quote(path, safe=_SAFE)}"


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


def make_store_folder(root: str) -> None:
    """Make a JSONL store's folder (mode 0700) if it is missing: in a folder that exists
    only, but for the embedded default, whose folders are made as needed (as the XDG
    base directory rules ask).

    :raises StoreFolderError: the folder above ``root`` is missing.
    """
    from .files import make_bucket, mkdirs

    if os.path.isdir(root):
        return
    if root == os.path.abspath(data_folder_store()):
        mkdirs(root)
        return
    try:
        make_bucket(root)  # one level, as a bucket is made
    except (FileNotFoundError, NotADirectoryError):
        raise StoreFolderError(root, os.path.dirname(root)) from None
