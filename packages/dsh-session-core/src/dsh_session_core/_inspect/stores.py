"""The store a command reads: its URL (the option, the environment, the default), the
store opened for reading through the one URL mapping (:func:`open_store`: a missing
store, a folder not ours, a database that will not open, each refused with a clear
error), and its keys (:func:`with_keys`, :func:`key_variable`).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ..errors import InspectUsageError, SourceReadError
from .text import one_line, printable

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .._persistence.base import Backend
    from .._plugins.manager import PluginManager
    from ..errors import StoreFolderError

__all__ = [
    "folder_error", "installed_plugins", "key_variable", "open_store", "store_url", "with_keys",
]

_pm: PluginManager | None = None


def installed_plugins() -> PluginManager:
    """The installed plugins, loaded once per process (the CLI's, the viewer's)."""
    global _pm  # one manager per process: loading plugins costs entry-point scans
    if _pm is None:
        from .._plugins.manager import create_plugin_manager

        _pm = create_plugin_manager()
    return _pm


def store_url(store: str | None = None) -> str:
    """``store``, or when it is ``None`` the default store's URL
    (``$DSH_SESSION_STORE``, else the user's data folder).

    :raises InspectUsageError: ``store`` is empty (``--store ""``): it names no store,
        and is not taken for the default one.
    """
    from .._persistence.urls import default_store_url

    if store is None:
        return default_store_url()
    if not store:
        msg = "--store '' names no store"
        raise InspectUsageError(msg, hint="give a folder path or a store URL, or leave "
                                          "--store out for the default store "
                                          "($DSH_SESSION_STORE, else the user's data folder)")
    return store


def open_store(url: str, *, must_exist: bool = True, empty_if_missing: bool = False,
               plugins: PluginManager | None = None) -> Backend:
    """The backend of a store, for reading (any scheme a plugin opens too).

    :param must_exist: refuse a store that does not exist rather than create it (a
        SQLite file, a PostgreSQL database without dsh-session's tables).
    :param empty_if_missing: with ``must_exist``, an empty in-memory backend for a store
        that does not exist (what a dry run would find), instead of a refusal.
    :param plugins: the plugins whose URL schemes open (default: the installed ones).
    :raises InspectUsageError: a bad URL, or a store that lives in its backend object
        only (``memory:``: nothing outlives its process, so there is nothing to read and
        nowhere to fork to).
    :raises SourceReadError: a database that cannot be opened, or, with ``must_exist``,
        a store that does not exist.
    """
    from .._persistence.opening import backend_for
    from .._persistence.urls import printable_url
    from ..errors import DshSessionError, StoreFolderError, StoreNotFoundError

    def manager() -> PluginManager:
        return plugins if plugins is not None else installed_plugins()

    try:
        backend = backend_for(url, create=not must_exist, plugins=manager)
    except StoreFolderError as exc:
        raise folder_error(exc) from exc
    except StoreNotFoundError as exc:
        if empty_if_missing:
            return backend_for("memory:")
        raise SourceReadError(str(exc), hint="check the URL: the database the sessions "
                                             "were written to") from exc
    except ValueError as exc:  # an unknown scheme
        raise InspectUsageError(str(exc)) from exc
    except (DshSessionError, OSError) as exc:  # e.g. another schema version
        msg = f"cannot open the store {printable_url(url)}: {one_line(exc)}"
        raise SourceReadError(msg) from exc
    except ImportError as exc:  # the PostgreSQL backend without psycopg
        raise SourceReadError(str(exc), hint="pip install 'dsh-session[postgresql]'") from exc
    except Exception as exc:
        if type(exc).__module__.startswith(("psycopg", "redis")):  # a server driver's error
            msg = f"cannot open the store {printable_url(url)}: {one_line(exc)}"
            raise SourceReadError(msg, hint="check that the server runs, and the URL's "
                                            "host, port, user and database") from exc
        import sqlite3  # already loaded when a SQLite store raised it

        if not isinstance(exc, sqlite3.Error):
            raise
        msg = f"cannot open the store {url}: {exc}"
        raise SourceReadError(msg) from exc
    if backend.store_identity() is None:  # lives in this object only
        backend.close()
        msg = f"a {url} store lives and dies with its process"
        raise InspectUsageError(msg, hint="use a folder or a sqlite:/// store")
    if must_exist:
        _refuse_foreign_folder(backend, url)
    return with_keys(backend)


def _refuse_foreign_folder(backend: Backend, url: str) -> None:
    """Refuse, before anything is read or written there, a JSONL store's folder that
    holds something else and no store (:func:`~.buckets.foreign_entries`):
    the user's own folder, named by mistake.

    :raises SourceReadError: it holds no store (``backend`` is closed).
    """
    from .._persistence.backends.jsonl.backend import JsonlBackend
    from .._persistence.backends.jsonl.buckets import foreign_entries

    if not isinstance(backend, JsonlBackend):
        return
    try:
        foreign = foreign_entries(backend.root)
    except OSError:  # cannot be listed: the listing says why
        return
    if not foreign:
        return
    backend.close()
    shown = ", ".join(printable(name) for name in foreign[:3])
    if len(foreign) > 3:
        shown += f" and {len(foreign) - 3} more"
    msg = (f"no dsh-session store at {url}: the folder holds other things ({shown}), and "
           f"none of a store's")
    raise SourceReadError(msg, hint="name the store's own folder (it holds _no-cwd and "
                                    "cwd-<hex> folders); a log file is read by its path "
                                    "(dsh-session show FILE)")


#: The environment variable the read model takes an encrypted store's keys from
#: (:func:`with_keys`); the command line's ``--key-env`` names another
#: (:func:`key_variable`).
_KEY_VARIABLE: list[str] = []


@contextlib.contextmanager
def key_variable(name: str | None) -> Iterator[None]:
    """Take the keys from the environment variable ``name`` (``None``: the default,
    ``DSH_SESSION_KEYS``) while the block runs."""
    _KEY_VARIABLE.append(name or _default_key_variable())
    try:
        yield
    finally:
        _KEY_VARIABLE.pop()


def _default_key_variable() -> str:
    from .._persistence.encryption.keyring import KEYS_VARIABLE

    return KEYS_VARIABLE


def with_keys(backend: Backend) -> Backend:
    """``backend``, encrypted with the keys of the environment when it holds some (in
    ``DSH_SESSION_KEYS``, or the variable :func:`key_variable` names): sealed sessions
    are then read by opening their records, and plaintext ones are refused (docs/
    encryption.md). Without keys, ``backend`` as it is: a sealed session is refused
    where it would be read.

    :raises InspectUsageError: the variable is named but not set, or holds no keyring.
    """
    name = _KEY_VARIABLE[-1] if _KEY_VARIABLE else _default_key_variable()
    if not os.environ.get(name):
        if _KEY_VARIABLE and name != _default_key_variable():
            backend.close()
            msg = f"--key-env {name}: the environment variable {name} is not set"
            raise InspectUsageError(msg, hint="set it to kid:base64key[,kid:base64key...]")
        return backend
    from .._persistence.encryption.keyring import Keyring
    from .._persistence.opening import sealed_backend

    try:
        keys = Keyring.from_env(name)
    except ValueError as exc:
        backend.close()
        raise InspectUsageError(str(exc), hint="kid:base64key[,kid:base64key...], the "
                                               "first the current key") from None
    return sealed_backend(backend, keys)


def folder_error(exc: StoreFolderError) -> SourceReadError:
    """The error for a store that would be created in a folder that does not exist."""
    msg = f"cannot create the store {exc.path}: the folder {exc.folder} does not exist"
    return SourceReadError(msg, hint="create the folder first, or fix the path: "
                                     "sqlite:///name.db and jsonl:///name are relative to "
                                     "the working folder, sqlite:////abs/name.db (four "
                                     "slashes) absolute")
