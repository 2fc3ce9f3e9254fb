"""Stores for tests: the kinds of store, a fresh one's URL, fresh backends over one storage.

The kinds of store, the URL of a fresh one of each kind, and factories of fresh backend
instances over one storage.

A test that runs on several kinds of store takes its URL from :func:`make_store_url`
(or the ``store_url`` fixture of :mod:`dsh_session_core.testing.fixtures`, which does it
for each kind). PostgreSQL stores are throwaway databases of the server named by
``DSH_SESSION_TEST_POSTGRESQL`` (see :mod:`dsh_session_core.testing.postgresql`), taken
through the ``postgresql_url`` fixture: the functions here take the test's
``request`` for that, and need pytest only for a PostgreSQL or compact store. A kind
whose driver is not installed (psycopg, zstandard) skips the test, saying what to
install, as ``pytest.importorskip`` would (a PostgreSQL one fails under CI instead, as
without a server).
"""

from __future__ import annotations

__all__ = ["DURABLE_KINDS", "KINDS", "OPT_IN_KINDS", "BackendFactory",
           "make_backend_factory", "make_store_url"]

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from .. import Backend

#: Every built-in kind of store, as the fixtures run them (memory among them).
KINDS: tuple[str, ...] = ("jsonl", "jsonl+zstd", "memory", "sqlite", "postgresql", "redis")
#: The kinds a test runs on only when it names them (``store_kinds``), beyond
#: :data:`KINDS`: the Redis backend on a Redis Cluster (a store of the run's cluster, as
#: ``redis`` is of the run's server), for the suites that must hold there too.
OPT_IN_KINDS: tuple[str, ...] = ("redis-cluster",)
#: The kinds that outlive their process.
DURABLE_KINDS: tuple[str, ...] = ("jsonl", "jsonl+zstd", "sqlite", "postgresql",
                                  "redis")

#: Opens a fresh backend instance over one storage, as a second process would.
BackendFactory = Callable[[], "Backend"]

#: The module each kind of store needs beyond core, and the extra of core that installs
#: it.
_DRIVERS: dict[str, tuple[str, str]] = {
    "jsonl+zstd": ("zstandard", "zstd"),
    "postgresql": ("psycopg", "postgresql"),
    "redis": ("redis", "redis"),
    "redis-cluster": ("redis", "redis"),
}


def _need_driver(kind: str) -> None:
    """Skip the test when the module a kind of store needs cannot be imported, saying
    which and what installs it (``psycopg is not installed: pip install
    'dsh-session-core[postgresql]'``); for PostgreSQL, fail it under CI instead, where
    its tests must not skip (:func:`.postgresql.unavailable`). Other kinds need none."""
    if kind not in _DRIVERS:
        return
    import importlib

    module, extra = _DRIVERS[kind]
    try:
        importlib.import_module(module)
    except ImportError:
        import pytest

        reason = f"{module} is not installed: pip install 'dsh-session-core[{extra}]'"
        if kind == "postgresql":
            from .postgresql import unavailable

            unavailable(reason)
        pytest.skip(reason)


def make_store_url(kind: str, request: pytest.FixtureRequest, tmp: Path,
                   name: str = "store") -> str:
    """The URL of a fresh store ``name`` of kind ``kind`` under the folder ``tmp``:
    ``jsonl`` (a folder path), ``jsonl+zstd``, ``sqlite`` (``name.db``), ``postgresql``
    (a brand-new database of the test server: the ``postgresql_url`` fixture, so it
    skips without a server), ``redis`` (a key prefix of its own on the run's server:
    ``redis_url``), ``redis-cluster`` (the same on the run's cluster:
    ``redis_cluster_url``) or ``memory``.

    :raises ValueError: an unknown kind.
    """
    _need_driver(kind)
    if kind == "jsonl":
        return str(tmp / name)
    if kind == "jsonl+zstd":
        return f"jsonl+zstd:///{tmp / name}"
    if kind == "sqlite":
        return f"sqlite:///{tmp / name}.db"
    if kind == "postgresql":
        url: str = request.getfixturevalue("postgresql_url")
        return url
    if kind in ("redis", "redis-cluster"):
        url = request.getfixturevalue(_REDIS_FIXTURES[kind])
        return url
    if kind == "memory":
        return "memory:"
    msg = f"unknown kind of store {kind!r}: one of {', '.join(KINDS + OPT_IN_KINDS)}"
    raise ValueError(msg)


def make_backend_factory(kind: str, request: pytest.FixtureRequest,
                         tmp: Path) -> BackendFactory:
    """A factory of fresh backend instances of kind ``kind`` over one storage under
    ``tmp``: each call opens the same sessions anew, as another process would (a memory
    backend's storage is the object itself, so every call returns the one instance).
    PostgreSQL backends are closed after the test; tests may leave them open, as a
    process that exits would.

    :raises ValueError: an unknown kind.
    """
    _need_driver(kind)
    if kind == "memory":
        from .. import MemoryBackend

        shared = MemoryBackend()
        return lambda: shared
    if kind == "jsonl":
        from .. import JsonlBackend

        return lambda: JsonlBackend(tmp / "root")
    if kind == "jsonl+zstd":
        from .._persistence.backends.jsonl.zstd import JsonlZstdBackend

        return lambda: JsonlZstdBackend(tmp / "root")
    if kind == "sqlite":
        from .. import SqliteBackend

        return lambda: SqliteBackend(tmp / "sessions.db")
    if kind == "postgresql":
        return _postgresql_factory(request)
    if kind in ("redis", "redis-cluster"):
        return _redis_factory(request, _REDIS_FIXTURES[kind])
    msg = f"unknown kind of store {kind!r}: one of {', '.join(KINDS + OPT_IN_KINDS)}"
    raise ValueError(msg)


def _postgresql_factory(request: pytest.FixtureRequest) -> BackendFactory:
    from .. import PostgresBackend

    return _server_factory(request, "postgresql_url", PostgresBackend)


#: The fixture that gives a fresh store's URL, for each kind of Redis store.
_REDIS_FIXTURES = {"redis": "redis_url", "redis-cluster": "redis_cluster_url"}


def _redis_factory(request: pytest.FixtureRequest, fixture: str) -> BackendFactory:
    from .._persistence.backends.redis.backend import RedisBackend

    return _server_factory(request, fixture, RedisBackend)


def _server_factory(request: pytest.FixtureRequest, fixture: str,
                    make: Callable[[str], Backend]) -> BackendFactory:
    """Backends of the server the ``fixture`` URL names, each closed at the test's end."""
    url = request.getfixturevalue(fixture)
    made: list[Backend] = []

    def factory() -> Backend:
        made.append(make(url))
        return made[-1]

    def close_all() -> None:
        for backend in made:
            backend.close()

    request.addfinalizer(close_all)
    return factory
