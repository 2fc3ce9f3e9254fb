"""Opening stores by URL: :func:`open_store`.

:func:`open_store` makes a :class:`~.durable.DurableStore` on the backend a URL names
(or on the embedded default, :func:`~.urls.default_store_url`); :func:`backend_for`, the
one place where a store URL maps to a backend, lives in :mod:`.url_backends` and is
named here too.

The rules of the URLs themselves (paths, the default, printing one) are :mod:`.urls`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._model.session import Clock
from .._plugins.manager import PluginManager, create_plugin_manager
from .backends.url_backends import backend_for
from .store.durable import DurableStore
from .urls import store_target

if TYPE_CHECKING:
    from .base import Backend
    from .encryption.keyring import Keyring

__all__ = ["backend_for", "open_store", "sealed_backend"]


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

    A plain path is a JSONL store's folder: one that names a SQLite database (an
    existing one, or a new store named ``agent.db``, ``*.sqlite``...) is refused with
    the URL to use, ``sqlite:///agent.db``; a folder of that name that exists opens.

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
    :raises TypeError: ``url`` is neither a str nor a path-like of one.
    :raises StoreUrlError: an empty ``url``, a plain path naming a SQLite database, a
        URL naming a driver (``sqlite+aiosqlite:``), or one of a built-in scheme with a
        host or options (:func:`backend_for`).
    """
    target = store_target(url)
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
    from .encryption.sealed import SealedBackend
    from .encryption.sealing import Sealer

    try:
        return SealedBackend(backend, Sealer(keys))
    except BaseException:
        backend.close()
        raise
