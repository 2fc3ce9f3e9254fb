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


def _unzstd(raw: bytes) -> bytes:
    import zstandard

    try:
        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    except zstandard.ZstdError:
        return b""
