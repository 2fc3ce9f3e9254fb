"""Which backend a store URL names: :func:`backend_for`, where URLs map to backends.

The one place where URLs map to backends (the built-in schemes, else the plugins'
``store_backend`` hook). It imports each backend's module on first use (so no backend
imports it) and no store, so that what a store does may open another store by URL
(retention's archive) without an import cycle; making a store on the backend is
:mod:`.opening`'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..._plugins.manager import PluginManager, create_plugin_manager
from ..base import Backend

__all__ = ["backend_for"]


def backend_for(
    url: str,
    *,
    create: bool = True,
    plugins: Callable[[], PluginManager] | None = None,
) -> Backend:
    """The backend a store URL names: the one place where URLs map to backends.

    A path in a URL follows SQLAlchemy's rule (:mod:`.urls`): three slashes then a
    relative path, four for an absolute one.

    - ``sqlite:///name.db`` (``name.db`` in the working folder), ``sqlite:////abs/name.db``,
      ``sqlite:name.db``, or ``sqlite://`` and ``sqlite::memory:`` (in memory): SQLite;
    - ``postgresql://user@host:port/dbname`` (or ``postgres://``): PostgreSQL, shared by
      many hosts (needs the ``postgresql`` extra: psycopg 3);
    - ``redis://[[user]:password@]host:port/db?prefix=...`` (or ``rediss://``, TLS): a
      Redis server shared by many hosts, a stream per session (needs the ``redis``
      extra: redis-py);
    - ``memory:``: in memory (tests, throwaway sessions);
    - a folder path, ``jsonl:///folder``, ``jsonl:////abs/folder``, ``jsonl:folder``, or
      ``file:///abs/folder`` (RFC 8089: always absolute): JSONL;
    - ``jsonl+zstd:///folder``, ``jsonl+zstd:////abs/folder`` or ``jsonl+zstd:folder``:
      compact JSONL, each log's batches zstd frames (needs the ``zstd`` extra:
      zstandard);
    - any other scheme: the backend a plugin opens for it (the ``store_backend`` hook).

    A store is created in a folder that exists, never with the folders above it
    (:class:`StoreFolderError`; the embedded default's folders are made as needed). A
    plain path naming a SQLite database (an existing one, or a new store named ``*.db``,
    ``*.sqlite``...) is refused with its ``sqlite:`` URL, and so is a SQLAlchemy URL
    naming a driver (``sqlite+aiosqlite:``), with the URL without it (:mod:`.urls`
    decides which URLs name a store).

    :param create: whether the store may be created; ``False`` for readers: a SQLite
        file that does not exist, or a PostgreSQL database without dsh-session's tables,
        is then :class:`StoreNotFoundError` (JSONL and memory stores create nothing on
        open: a missing folder holds no session, see :meth:`Backend.exists`).
    :param plugins: the plugins to ask about a scheme core does not know, called only
        then (default: the installed plugins, :func:`create_plugin_manager`).
    :raises ValueError: an unknown scheme no plugin opens, with the ones that are known.
    :raises StoreUrlError: an empty URL; a URL of a built-in scheme with a host or
        options; a plain path that names a SQLite database; a URL naming a driver.
    :raises StoreFolderError: ``create``, and the folder the store would be created in
        does not exist.
    :raises StoreNotFoundError: not ``create``, and the store does not exist.
    :raises StoreKindError: a JSONL folder of the other kind (compact, or plain).
    :raises MissingExtraError: a compact store without zstandard installed.
    """
    from ..urls import check_folder, check_plain_path, driver_error, is_plain_path, local_store

    if not url:
        from ..urls import store_target

        store_target(url)  # refuses it, as open_store does
    scheme = url.partition(":")[0]
    if scheme == "memory":
        from .memory import MemoryBackend

        return MemoryBackend()
    if scheme in ("postgresql", "postgres"):
        from .postgres.backend import PostgresBackend

        return PostgresBackend(url, create=create)
    if scheme in ("redis", "rediss"):
        from .redis.backend import RedisBackend

        return RedisBackend(url, create=create)
    local = local_store(url)
    if local is not None:  # a SQLite file, a JSONL folder (or a SQLite in memory)
        kind, path = local
        if kind == "sqlite":  # which checks its folder itself, when it may create
            from .sqlite.backend import SqliteBackend

            return SqliteBackend(path, create=create)
        if is_plain_path(url):  # a folder: not a database named by its path
            check_plain_path(path)
        if create:  # made in a folder that exists, if at all
            check_folder(os.path.abspath(path))
        if kind == "jsonl+zstd":
            from .jsonl.zstd import JsonlZstdBackend

            return JsonlZstdBackend(path)
        from .jsonl.backend import JsonlBackend

        return JsonlBackend(path)
    from ..._plugins.manager import PluginHooks

    pm = plugins() if plugins is not None else create_plugin_manager()
    backend = PluginHooks(pm).store_backend(url, create)
    if backend is not None:
        return backend
    refused = driver_error(url)
    if refused is not None:
        raise refused
    msg = (
        f"unknown store URL scheme {scheme!r} in {url!r}: use a folder path, jsonl:///path, "
        f"jsonl+zstd:///path, sqlite:///path.db (relative; sqlite:////abs/path.db is "
        f"absolute), postgresql://host/dbname, redis://host:6379/0 or memory:"
    )
    raise ValueError(msg)
