"""The kit's pytest fixtures: a plugin a test suite loads by asking for it.

A suite asks for it in its root ``conftest.py``::

    pytest_plugins = ["dsh_session_core.testing.fixtures"]

- ``store_kind``: the kind of store a test runs on; every test that uses it (or a
  fixture below) runs once per kind: ``jsonl``, ``jsonl+zstd``, ``memory``, ``sqlite``,
  ``postgresql``, ``redis``. Mark a module or a test
  ``@pytest.mark.store_kinds("jsonl", ...)`` to run on fewer, or on ``redis-cluster``
  too (a kind only a mark names: a Redis Cluster is started for it); a test that
  parametrizes ``store_kind`` itself is left alone. A compact store skips without
  zstandard, a PostgreSQL one without psycopg or a server (fails, under CI), each
  saying why;
- ``store_url``: the URL of a fresh, empty store of that kind;
- ``store``: a :class:`~dsh_session_core.DurableStore` open on it (the installed
  plugins loaded), closed after the test;
- ``backend_factory``: opens fresh backend instances of that kind over one storage (a
  :data:`~dsh_session_core.testing.stores.BackendFactory`);
- ``plugins_as_installed``: the environment's plugin switches
  (``DSH_SESSION_DISABLE_PLUGINS``, ``DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD``) removed for
  the test, so that plugin managers load what is installed (what :func:`check_plugin`
  checks); ask for it with ``pytestmark = pytest.mark.usefixtures("plugins_as_installed")``;
- ``postgresql_server``, ``postgresql_databases``, ``postgresql_url``: the server named
  by ``DSH_SESSION_TEST_POSTGRESQL`` and a brand-new database on it for one test,
  dropped after it (see :mod:`dsh_session_core.testing.postgresql`);
- ``redis_server``, ``redis_url``: a ``redis-server`` the run starts on a free port
  (stopped at its end), and a store of its own on it for one test (a key prefix of its
  own, its keys removed after it; see :mod:`dsh_session_core.testing.redis`);
- ``redis_cluster``, ``redis_cluster_url``: a Redis Cluster of three primaries without
  replicas the run starts when a test first asks for it (the
  :class:`~dsh_session_core.testing.redis.RedisCluster`; stopped at the run's end),
  and a store of its own on it for one test, the same way.
"""

from __future__ import annotations

__all__ = [
    "backend_factory",
    "plugins_as_installed",
    "postgresql_databases",
    "postgresql_server",
    "postgresql_url",
    "pytest_configure",
    "pytest_generate_tests",
    "redis_cluster",
    "redis_cluster_url",
    "redis_server",
    "redis_url",
    "store",
    "store_kind",
    "store_url",
]

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .stores import (
    KINDS,
    OPT_IN_KINDS,
    BackendFactory,
    _need_driver,
    make_backend_factory,
    make_store_url,
)

if TYPE_CHECKING:
    from .. import DurableStore
    from .postgresql import Databases
    from .redis import RedisCluster

_MARKER = "store_kinds"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_MARKER}(*kinds): the kinds of store the test's store_kind takes "
                   f"(default: {', '.join(KINDS)}; also {', '.join(OPT_IN_KINDS)})")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Runs every test that uses ``store_kind`` once per kind: those its
    ``store_kinds`` mark names, or all of them."""
    if "store_kind" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if "store_kind" in ([n.strip() for n in names.split(",")]
                            if isinstance(names, str) else names):
            return  # the test chose its kinds itself
    marker = metafunc.definition.get_closest_marker(_MARKER)
    kinds = tuple(marker.args) if marker is not None else KINDS
    unknown = sorted(set(kinds) - set(KINDS) - set(OPT_IN_KINDS))
    if unknown:
        msg = f"{metafunc.definition.nodeid}: unknown kinds of store {unknown}"
        raise pytest.UsageError(msg)
    metafunc.parametrize("store_kind", kinds, indirect=True)


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    """The kind of store of this run of the test."""
    kind: str = request.param
    _need_driver(kind)  # skips (a missing server is the postgresql_* fixtures')
    return kind


@pytest.fixture
def store_url(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a fresh, empty store of this run's kind."""
    return make_store_url(store_kind, request, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[DurableStore]:
    """A store open on ``store_url``, with the installed plugins; closed after the test."""
    from .. import open_store

    with open_store(store_url) as opened:
        yield opened


@pytest.fixture
def backend_factory(store_kind: str, request: pytest.FixtureRequest,
                    tmp_path: Path) -> BackendFactory:
    """Opens fresh backend instances of this run's kind over one storage."""
    return make_backend_factory(store_kind, request, tmp_path)


@pytest.fixture
def plugins_as_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removes the environment's block list and autoload switch for the test: plugin
    managers then load every installed plugin, as a user's installation does."""
    from .._base.names import DISABLE_AUTOLOAD_ENV, DISABLE_PLUGINS_ENV

    monkeypatch.delenv(DISABLE_PLUGINS_ENV, raising=False)
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)


@pytest.fixture(scope="session")
def postgresql_server() -> str:
    """The admin URL of the PostgreSQL test server (``DSH_SESSION_TEST_POSTGRESQL``).
    Without it, or without psycopg: skip, or fail under CI."""
    _need_driver("postgresql")
    import psycopg

    from .postgresql import ENV, server_url

    url = server_url()
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.Error as exc:
        pytest.fail(f"{ENV}={url} does not connect: {exc}", pytrace=False)
    return url


@pytest.fixture(scope="session")
def postgresql_databases(postgresql_server: str) -> Iterator[Databases]:
    """Creates and drops the tests' databases."""
    from .postgresql import Databases

    databases = Databases(postgresql_server)
    yield databases
    databases.close()


@pytest.fixture
def postgresql_url(request: pytest.FixtureRequest,
                   postgresql_databases: Databases) -> Iterator[str]:
    """The URL of a brand-new empty database for this test, dropped after it (even with
    connections the test left open)."""
    with postgresql_databases.database(request.node.name) as url:
        yield url


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of the run's Redis server (started here, stopped at the end of the run).
    Without ``redis-server`` or redis-py: skip, or fail under CI."""
    _need_driver("redis")
    from .redis import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis-server")).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_url(request: pytest.FixtureRequest, redis_server: str) -> Iterator[str]:
    """The URL of a store of its own for this test on the run's server: a fresh key
    prefix, whose keys are removed after the test."""
    import redis

    yield from _prefixed(redis_server, redis.Redis.from_url)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """The run's Redis Cluster: three durable primaries, no replicas (started here, on
    first use, stopped at the end of the run). A test may restart one of its primaries,
    and waits on :meth:`~.redis.RedisCluster.wait_ok` after. Without ``redis-server``
    or redis-py: skip, or fail under CI."""
    _need_driver("redis")
    from .redis import RedisCluster

    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisCluster) -> Iterator[str]:
    """The URL of a store of its own for this test on the run's cluster: a fresh key
    prefix, whose keys (on every primary) are removed after the test."""
    import redis.cluster

    redis_cluster.wait_ok()  # a test before may have restarted a primary
    yield from _prefixed(redis_cluster.url, redis.cluster.RedisCluster.from_url)


def _prefixed(url: str, connect: Callable[[str], Any]) -> Iterator[str]:
    """A store URL of a fresh key prefix on the server (cluster) of ``url``; after the
    test, its keys are removed."""
    import uuid

    prefix = f"t{uuid.uuid4().hex[:12]}:"
    yield f"{url}?prefix={prefix}"
    client = connect(url)
    try:
        # A cluster's client scans every primary; DEL of keys in many slots is split.
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for at in range(0, len(keys), 1000):
            client.delete(*keys[at:at + 1000])
    finally:
        client.close()
