"""Shared fixtures: where the reference logs live, and fresh plugin managers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh_session_core import PluginManager, create_plugin_manager

if TYPE_CHECKING:
    from pg_support import Databases

#: The reference logs and goldens, shipped beside the repository (not in it).
UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "upstream"


def upstream_dir() -> Path:
    """The upstream fixtures folder, or skip the test saying where it was looked for."""
    if not (UPSTREAM / "README.md").is_file():
        pytest.skip(f"reference fixtures not found at {UPSTREAM} (../shared is absent)")
    return UPSTREAM


@pytest.fixture
def upstream() -> Path:
    return upstream_dir()


@pytest.fixture(params=["jsonl", "jsonl+zstd", "memory", "sqlite", "postgresql"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """Opens fresh backend instances over one storage (the persistence contract runs on
    every backend of ``persist_support.BACKENDS``)."""
    from persist_support import BACKENDS

    return BACKENDS[request.param](request, tmp_path)


@pytest.fixture
def pm() -> PluginManager:
    """A plugin manager with core only: no entry point is loaded."""
    return create_plugin_manager(autoload=False)


@pytest.fixture(scope="session")
def postgresql_server() -> str:
    """The admin URL of the PostgreSQL test server (``DSH_SESSION_TEST_POSTGRESQL``;
    ``python3 dev.py test`` starts one). Without it: skip, or fail under CI."""
    import psycopg

    from pg_support import ENV, server_url

    url = server_url()
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.Error as exc:
        pytest.fail(f"{ENV}={url} does not connect: {exc}", pytrace=False)
    return url


@pytest.fixture(scope="session")
def postgresql_databases(postgresql_server: str) -> Iterator[Databases]:
    """Creates and drops the tests' databases (a ``pg_support.Databases``)."""
    from pg_support import Databases

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
