"""What the integrations' erasing tests share (docs/erasing.md, "Per integration"): a
marker searched byte by byte in every file under a store, a compact store's compressed
frames searched decompressed too."""

from __future__ import annotations

import secrets
from pathlib import Path


def new_marker() -> str:
    """A string no other test writes."""
    return f"zq{secrets.token_hex(6)}"


def store_root(url: str) -> Path:
    """The folder holding every file of a JSONL store (its folder) or a SQLite one (the
    database's folder: the file, its WAL, its journal)."""
    return Path(url.removeprefix("sqlite:///")).parent if url.startswith("sqlite:") \
        else Path(url)


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``needle``, relative to ``root``."""
    found = []
    raw_needle = needle.encode()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        if raw_needle in raw or (path.suffix == ".zst" and raw_needle in _unzstd(raw)):
            found.append(str(path.relative_to(root)))
    return found


def no_file_holds(store_url: str, *needles: str) -> None:
    """Assert that no file of the store at ``store_url`` holds any of ``needles``."""
    root = store_root(store_url)
    for needle in needles:
        assert files_holding(root, needle) == [], needle


def _unzstd(raw: bytes) -> bytes:
    import zstandard

    try:
        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    except zstandard.ZstdError:
        return b""


def pg_tables_holding(url: str, needle: str) -> list[str]:
    """The tables of the current schema of the PostgreSQL database at ``url`` with a
    row whose text holds ``needle`` (a server's files are not a test's to read: its
    rows are searched through SQL)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        return [t for t in tables if conn.execute(
            f'SELECT count(*) FROM "{t}" AS t WHERE t::text LIKE %s',
            (f"%{needle}%",)).fetchone() != (0,)]
