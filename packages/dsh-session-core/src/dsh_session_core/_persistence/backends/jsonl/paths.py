"""Where the JSONL backend keeps a session: the reference's on-disk layout (spec §9.1).

::

    <root>/cwd-<first 12 hex of sha256(cwd)>/<encode_segment(id)>.jsonl   sessions with a cwd
    <root>/_no-cwd/<encode_segment(id)>.jsonl                              sessions without

A session id is any string, so it is encoded into one safe file name: ``[A-Za-z0-9._-]``
stay, every other UTF-16 code unit (``~`` included) becomes ``~`` and four uppercase hex
digits. Escaping ``~`` itself and using a fixed width makes the encoding injective, and
no id can name a path outside its bucket (``/``, ``\\0``, ``.`` and ``..`` never survive).
The encoding works on UTF-16 code units, not code points, because that is what the
reference's JavaScript strings are made of: an emoji is two escapes, and the file names
of the two implementations agree.

A file name holds at most 255 bytes (``NAME_MAX`` of Linux and macOS file systems), and
the longest name made from a segment is the temp file of a first write,
``<segment>.jsonl.<12 hex>.tmp``: a segment may be :data:`MAX_SEGMENT` (232) characters
long (escapes are ASCII: characters are bytes). The reference stores no session whose
encoded id is longer (its first write fails), so a longer encoding is shortened here,
and only here, to one that fits: its first 162 to 166 characters (cut before an escape
it would split), ``~H`` and the 64 hex digits of the SHA-256 of the whole encoding. The
normal encoding never holds ``~H`` (an escape is ``~`` and four *hex* digits), so a
shortened name is never the name of a short id, and two ids share one only if SHA-256
collides. Every id (but the empty one) therefore has a file, and ids the reference can
store keep the reference's file name.

A compact store (``jsonl+zstd:``, :mod:`.zstd`) names its logs
``<encode_segment(id)>.jsonl.zst`` in the same buckets (10 characters after the segment,
fewer than a temp file's 23), and its first writes use the same temp file names.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from typing import Final

from ....jscompat import utf8_bytes

__all__ = [
    "COMPACT_SUFFIX",
    "MAX_SEGMENT",
    "bucket_name",
    "encode_segment",
    "lock_path",
    "log_path",
    "session_dir",
]

#: How a compact log's file name ends (a plain one's ends ``.jsonl``).
COMPACT_SUFFIX: Final = ".jsonl.zst"

#: The bucket of sessions that have no cwd.
NO_CWD = "_no-cwd"

_SAFE = re.compile(r"[A-Za-z0-9._-]+")
_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")

#: The longest segment kept as the reference encodes it: 255 bytes of file name, less
#: the longest suffix a log's files take (``.jsonl.<12 hex>.tmp``, 23 characters).
MAX_SEGMENT = 255 - len(".jsonl.") - 12 - len(".tmp")
_HASHED = "~H"  # never in a reference encoding: "~" is followed by four hex digits
_HEAD = MAX_SEGMENT - len(_HASHED) - 64


def encode_segment(raw: str) -> str:
    """``raw`` as one file-name segment, reversibly and without path syntax.

    ``.`` and ``..`` are escaped whole (they are made of kept characters but would name a
    directory); anything else keeps ``[A-Za-z0-9._-]`` and escapes each other UTF-16
    code unit as ``~XXXX``: ``"a/b"`` → ``"a~002Fb"``, ``"😀"`` → ``"~D83D~DE00"``.
    An encoding longer than :data:`MAX_SEGMENT` is shortened to fit a file name (see
    the module docstring); every other one is the reference's.

    :raises ValueError: ``raw`` is empty (an empty name would be the bucket itself).
    """
    if not raw:
        msg = "cannot encode an empty path segment"
        raise ValueError(msg)
    if raw == ".":
        return "~002E"
    if raw == "..":
        return "~002E~002E"
    if _SAFE.fullmatch(raw):  # the common case (uuids, slugs): nothing to escape
        return raw if len(raw) <= MAX_SEGMENT else _shortened(raw)
    out: list[str] = []
    for ch in raw:
        if ch in _KEEP:
            out.append(ch)
            continue
        code = ord(ch)
        if code > 0xFFFF:  # an astral character is a surrogate pair in UTF-16
            code -= 0x10000
            out.append(f"~{0xD800 + (code >> 10):04X}~{0xDC00 + (code & 0x3FF):04X}")
        else:
            out.append(f"~{code:04X}")
    encoded = "".join(out)
    return encoded if len(encoded) <= MAX_SEGMENT else _shortened(encoded)


def _shortened(encoded: str) -> str:
    """A too-long encoding as a name of :data:`MAX_SEGMENT` characters at most: its head
    (never ending inside an escape), ``~H``, the SHA-256 of all of it."""
    head = encoded[:_HEAD]
    cut = head.rfind("~", _HEAD - 4)
    if cut >= 0:  # an escape would be split: leave it out whole
        head = head[:cut]
    return head + _HASHED + hashlib.sha256(encoded.encode("ascii")).hexdigest()


@functools.lru_cache(maxsize=256)
def bucket_name(cwd: str | None) -> str:
    """The bucket directory name of a cwd: ``cwd-`` + 12 hex of its SHA-256, or
    ``_no-cwd``. (Cached: the append path recomputes it for every batch.)"""
    if cwd is None:
        return NO_CWD
    return "cwd-" + hashlib.sha256(utf8_bytes(cwd)).hexdigest()[:12]


def session_dir(root: str | os.PathLike[str], cwd: str | None) -> str:
    """The bucket directory of ``cwd`` under ``root`` (``None``: the no-cwd bucket)."""
    return os.path.join(os.fspath(root), bucket_name(cwd))


@functools.lru_cache(maxsize=1024)
def _file_in_bucket(root: str, cwd: str | None, session_id: str, suffix: str) -> str:
    return os.path.join(root, bucket_name(cwd), encode_segment(session_id) + suffix)


def log_path(root: str | os.PathLike[str], cwd: str | None, session_id: str,
             suffix: str = ".jsonl") -> str:
    """The log file of a session: ``<bucket>/<encode_segment(id)>.jsonl`` (a compact
    store's: ``.jsonl.zst``, its ``suffix``)."""
    return _file_in_bucket(os.fspath(root), cwd, session_id, suffix)


def lock_path(root: str | os.PathLike[str], cwd: str | None, session_id: str) -> str:
    """The writer-lock file of a session, beside its log: ``<bucket>/<encoded id>.lock``
    (not a ``.jsonl`` name, so listing never reads it)."""
    return _file_in_bucket(os.fspath(root), cwd, session_id, ".lock")
