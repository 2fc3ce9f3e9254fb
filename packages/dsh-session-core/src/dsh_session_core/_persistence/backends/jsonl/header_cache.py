"""The JSONL store's header cache: what listing a large store needs to read no log.

Listing (``list()``, ``ls``, ``copy``...) needs every session's header, the first line of
its log. Opening 100,000 files for their first line costs as much as reading them, so a
store keeps, in one file (:data:`CACHE_FILE` in the folder :data:`CACHE_DIR` at its root),
each log's header with the identity of the file it was read from: its inode, size and
modification time. A folder, not a file: the reference implementation takes every
folder at a store's root for a bucket and reads its ``*.jsonl`` files, which this one has
none of, so it sees an empty bucket and nothing else. A cached
header is used only while ``stat`` still finds that very file unchanged; anything else
(a new, appended, replaced or edited log) is read again. The cache can therefore never
be stale, only incomplete, and a missing, unreadable or corrupt cache is a cold one. It
is written (atomically, mode 0600) by a listing that found it out of date, when the
store's root can be written; a read-only store is listed without it.

The logs stay the reference's, and the only truth: the cache holds nothing a log does
not, and deleting it loses nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import Final

import msgspec

from ...._schema.header import SessionHeader

__all__ = ["CACHE_DIR", "CACHE_FILE", "Cached", "load", "save"]

#: The cache's folder, at a store's root (no bucket has this name: they are ``_no-cwd``
#: and ``cwd-<hex>``).
CACHE_DIR: Final = ".headers-cache"
#: The cache file in it (MessagePack: it decodes in half the time JSON takes); its
#: version is in its name and its content.
CACHE_FILE: Final = "headers.v2"
_VERSION: Final = 2


class Cached(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One log's header, and the file it was read from."""

    bucket: str
    name: str
    inode: int
    size: int
    mtime_ns: int
    header: SessionHeader


class _File(msgspec.Struct, array_like=True):
    version: int
    entries: list[Cached]


_decoder = msgspec.msgpack.Decoder(_File)
_encoder = msgspec.msgpack.Encoder()


def load(root: str) -> dict[tuple[str, str], Cached]:
    """The cached headers by ``(bucket, file name)``; empty when there is no usable
    cache (absent, unreadable, corrupt, or of another version)."""
    try:
        with open(os.path.join(root, CACHE_DIR, CACHE_FILE), "rb") as f:
            data = f.read()
        cache = _decoder.decode(data)
    except (OSError, msgspec.DecodeError):
        return {}
    if cache.version != _VERSION:
        return {}
    return {(c.bucket, c.name): c for c in cache.entries}


def save(root: str, entries: list[Cached]) -> None:
    """Write the cache, atomically (a temp file renamed over it); quietly nothing when
    the root cannot be written (a read-only store), or the write fails. The temp file
    ends in ``.part``, not ``.tmp``: listing sweeps a bucket's ``.tmp`` files, and would
    take a concurrent writer's."""
    folder = os.path.join(root, CACHE_DIR)
    path = os.path.join(folder, CACHE_FILE)
    temp = f"{path}.{secrets.token_hex(6)}.part"
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                     | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_encoder.encode(_File(_VERSION, entries)))
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
