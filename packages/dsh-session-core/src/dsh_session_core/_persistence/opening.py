"""Opening stores by URL: :func:`backend_for`, the one place where a store URL maps to
a backend (the built-in schemes, else the plugins' ``store_backend`` hook), and
:func:`open_store`, which makes a :class:`~.store.DurableStore` on it (or on the
embedded default, :func:`~.urls.default_store_url`).

The rules of the URLs themselves (paths, the default, printing one) are :mod:`.urls`;
this module imports the backends' modules, each on first use, so no backend imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .._plugins import PluginManager, create_plugin_manager
from .._session import Clock
from .base import Backend
from .store import DurableStore
from .urls import default_store_url

if TYPE_CHECKING:
    from .sealing import Keyring

__all__ = ["backend_for", "open_store", "sealed_backend"]


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
    - ``memory:``: in memory (tests, throwaway sessions);
    - a folder path, ``jsonl:///folder``, ``jsonl:////abs/folder``, ``jsonl:folder``, or
      ``file:///abs/folder`` (RFC 8089: always absolute): JSONL;
    - ``jsonl+zstd:///folder``, ``jsonl+zstd:////abs/folder`` or ``jsonl+zstd:folder``:
      compact JSONL, each log's batches zstd frames (needs the ``zstd`` extra:
      zstandard);
    - any other scheme: the backend a plugin opens for it (the ``store_backend`` hook).

    A store is created in a folder that exists, never with the folders above it
    (:class:`StoreFolderError`; the embedded default's folders are made as needed).

    :param create: whether the store may be created; ``False`` for readers: a SQLite
        file that does not exist, or a PostgreSQL database without dsh-session's tables,
        is then :class:`StoreNotFoundError` (JSONL and memory stores create nothing on
        open: a missing folder holds no session, see :meth:`Backend.exists`).
    :param plugins: the plugins to ask about a scheme core does not know, called only
        then (default: the installed plugins, :func:`create_plugin_manager`).
    :raises ValueError: an unknown scheme no plugin opens, with the ones that are known.
    :raises StoreUrlError: a URL of a built-in scheme with a host or options.
    :raises StoreFolderError: ``create``, and the folder the store would be created in
        does not exist.
    :raises StoreNotFoundError: not ``create``, and the store does not exist.
    :raises StoreKindError: a JSONL folder of the other kind (compact, or plain).
    :raises MissingExtraError: a compact store without zstandard installed.
    """
    from .urls import check_folder, local_store

    scheme = url.partition(":")[0]
    if scheme == "memory":
        from .memory import MemoryBackend

        return MemoryBackend()
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresBackend

        return PostgresBackend(url, create=create)
    local = local_store(url)
    if local is not None:  # a SQLite file, a JSONL folder (or a SQLite in memory)
        kind, path = local
        if kind == "sqlite":  # which checks its folder itself, when it may create
            from .sqlite import SqliteBackend

            return SqliteBackend(path, create=create)
        if create:  # made in a folder that exists, if at all
            check_folder(os.path.abspath(path))
        if kind == "jsonl+zstd":
            from .jsonl_zstd import JsonlZstdBackend

            return JsonlZstdBackend(path)
        from .jsonl import JsonlBackend

        return JsonlBackend(path)
    from .._plugins import PluginHooks

    pm = plugins() if plugins is not None else create_plugin_manager()
    backend = PluginHooks(pm).store_backend(url, create)
    if backend is not None:
        return backend
    msg = (
        f"unknown store URL scheme {scheme!r} in {url!r}: use a folder path, jsonl:///path, "
        f"jsonl+zstd:///path, sqlite:///path.db (relative; sqlite:////abs/path.db is "
        f"absolute), postgresql://host/dbname or memory:"
    )
    raise ValueError(msg)


def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    plugin_manager: PluginManager | None = None,
    clock: Clock | None = None,
    strict: bool = True,
    foreign_types: Iterable[str] = (),
    checks: bool = False,
    keys: Keyring | None = None,
) -> DurableStore:
    """Open a durable store: the embedded default (JSONL in the user's data folder) when
    ``url`` is omitted, else the backend the URL names (see :func:`backend_for`).

    :param strict: appends refuse an event type no plugin declares, an unknown key and
        an unknown union member (the default); ``False`` keeps them verbatim, for a
        harness that appends foreign events on purpose.
    :param foreign_types: event-type patterns (``"myharness/*"``) appended verbatim
        even when strict.
    :param checks: appends also refuse an event that breaks turn enclosure or tool
        pairing (a ``tool/result`` answering no ``tool/call`` of its turn and step).
    :param keys: encrypt at rest (docs/encryption.md): every record is sealed with the
        keyring's current key, and only sealed sessions are read (needs the
        ``encryption`` extra: cryptography). Without it, an encrypted session is
        refused with :class:`~dsh_session_core.errors.EncryptedSessionError`.
    :raises MissingExtraError: ``keys`` without cryptography installed.
    """
    target = os.fspath(url) if url is not None else default_store_url()
    pm = plugin_manager

    def plugins() -> PluginManager:  # made once, and only when a plugin is asked
        nonlocal pm
        if pm is None:
            pm = create_plugin_manager()
        return pm

    backend = backend_for(target, plugins=plugins)
    if keys is not None:
        backend = sealed_backend(backend, keys)
    return DurableStore(backend, pm, clock=clock, strict=strict,
                        foreign_types=foreign_types, checks=checks)


def sealed_backend(backend: Backend, keys: Keyring) -> Backend:
    """``backend`` with its records sealed with ``keys`` (imports cryptography now).

    :raises MissingExtraError: cryptography is not installed.
    """
    from .sealed import SealedBackend
    from .sealing import Sealer

    try:
        return SealedBackend(backend, Sealer(keys))
    except BaseException:
        backend.close()
        raise
