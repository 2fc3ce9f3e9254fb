"""The PostgreSQL server of a test run: where it is, and throwaway databases on it.

The server is given by ``DSH_SESSION_TEST_POSTGRESQL``: the URL of a role that may
create databases (this repository's ``python3 dev.py test`` starts one with
``tests/pgserver.py`` and sets it). Without it the PostgreSQL tests skip, except under CI
(``CI`` set), where they fail: CI must never pass by skipping them.

Needs pytest; its databases need psycopg (core's ``postgresql`` extra), imported only
when one is made: without it, the fixtures say what to install (skipping the test, or
failing it under CI) rather than stopping at the import. Imported only by the fixtures
that use a PostgreSQL store.
"""

from __future__ import annotations

__all__ = [
    "ENV",
    "MISSING",
    "Databases",
    "server_url",
    "unavailable",
    "under_ci",
    "with_database",
]

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    import psycopg

ENV = "DSH_SESSION_TEST_POSTGRESQL"
MISSING = (f"no PostgreSQL server: run `python3 dev.py test`, which starts one, "
           f"or set {ENV}=postgresql://...")


def under_ci() -> bool:
    """Whether we run under CI, where a skipped PostgreSQL test is a failure."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip the test for ``reason``, or fail it under CI."""
    if under_ci():
        pytest.fail(f"{reason} (CI is set: PostgreSQL tests must not skip)", pytrace=False)
    pytest.skip(reason)


def server_url() -> str:
    """The admin URL of the test server, or skip (fail under CI) without one."""
    url = os.environ.get(ENV, "").strip()
    if not url:
        unavailable(MISSING)
    return url


def with_database(url: str, dbname: str) -> str:
    """``url`` naming database ``dbname`` instead (its other parts kept)."""
    return urlunsplit(urlsplit(url)._replace(path="/" + dbname))


class Databases:
    """Creates and drops throwaway databases through one admin connection."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    def _admin(self) -> psycopg.Connection[tuple[object, ...]]:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.admin_url, autocommit=True)
        return self._conn

    def create(self, hint: str = "") -> str:
        """A new empty database (a copy of template0); returns its URL."""
        from psycopg import sql

        slug = re.sub(r"[^a-z0-9]+", "_", hint.lower()).strip("_")[:30]
        name = f"dsh_{slug}_{uuid.uuid4().hex[:12]}" if slug else f"dsh_{uuid.uuid4().hex}"
        # template0 is the smallest template there is (about 20 ms to copy on PG 15) and
        # nobody connects to it, so copies never wait for its other users.
        self._admin().execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        return with_database(self.admin_url, name)

    def drop(self, url: str) -> None:
        """Drop the database of ``url``; connections still open to it are terminated."""
        from psycopg import sql

        name = urlsplit(url).path.lstrip("/")
        self._admin().execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    @contextmanager
    def database(self, hint: str = "") -> Iterator[str]:
        """A new empty database for the ``with`` block, dropped after it."""
        url = self.create(hint)
        try:
            yield url
        finally:
            self.drop(url)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
