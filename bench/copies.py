"""What several benchmarks share: a JSONL store's sessions copied into a SQLite store and,
when a PostgreSQL server is given, into a throwaway database of it, so that the same
sessions are measured on every backend in one run. Not a benchmark itself."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dsh_session_core._persistence.copy import copy_sessions
from dsh_session_core._persistence.opening import backend_for


@contextlib.contextmanager
def every_backend(jsonl: str, folder: str, pg: str | None, database: str
                  ) -> Iterator[dict[str, str]]:
    """``{"jsonl": ..., "sqlite": ..., ["postgresql": ...]}``: the store at ``jsonl`` and its
    copies (SQLite under ``folder``; PostgreSQL as ``database`` on the server ``pg``,
    dropped on exit), unverified (the copy's own checks are not what is measured)."""
    urls = {"jsonl": jsonl, "sqlite": f"sqlite:///{folder}/store.db"}
    admin = None
    if pg is not None:
        import psycopg

        admin = psycopg.connect(pg, autocommit=True)
        admin.execute(f"DROP DATABASE IF EXISTS {database}")
        admin.execute(f"CREATE DATABASE {database}")
        urls["postgresql"] = pg.rsplit("/", 1)[0] + f"/{database}"
    try:
        for name, url in urls.items():
            if name != "jsonl":
                src, dst = backend_for(jsonl), backend_for(url)
                try:
                    copy_sessions(src, dst, verify=False)
                finally:
                    src.close()
                    dst.close()
        yield urls
    finally:
        if admin is not None:
            admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            admin.close()
