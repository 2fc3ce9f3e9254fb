"""A compact JSONL log's frames (``jsonl+zstd:``), as every reader of one reads them.

The log-format side of the compact store, beside :mod:`.logfile` (issue 17, point 4).

A compact log is a plain concatenation of zstd frames, one per durable write; decoded,
the frames are the plain log's bytes exactly, so ``zstd -dc`` of a compact log is the
reference's JSONL log. Every frame is whole on its own (no dictionary, no window shared
with another frame) and carries a checksum of its content. This module decodes them:
all of a log's complete frames (:func:`decode_frames`, a file's up to its durable-end
mark: :func:`decode_file`), its first line from the first frame alone
(:func:`first_line`), and the frames that arrive for a follower (:data:`FRAMES`).
What a load makes of an undecodable frame, and how the backend writes frames, is
:mod:`.zstd`'s.

``zstandard`` is an extra (``pip install 'dsh-session-core[zstd]'``), imported when a
frame is first decoded, never before.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, BinaryIO, Final

from ..errors import MissingExtraError
from .end import history_end
from .tail import Framing

__all__ = [
    "FRAMES",
    "MAGIC",
    "Frames",
    "decode_file",
    "decode_frames",
    "first_line",
    "read_plain",
    "zstandard_module",
]

#: How a zstd frame starts (its magic number, little-endian).
MAGIC: Final = b"\x28\xb5\x2f\xfd"

#: Compressed bytes handed to the decoder at once: a frame ends somewhere in a chunk, and
#: what follows it is copied out (``unused_data``) for the next frame.
_CHUNK: Final = 4096


def zstandard_module() -> Any:
    """The ``zstandard`` module, imported now.

    :raises MissingExtraError: it is not installed.
    """
    try:
        import zstandard
    except ImportError as exc:
        feature = "the compact JSONL store (jsonl+zstd:)"
        raise MissingExtraError(feature, "zstandard", "dsh-session-core[zstd]") from exc
    return zstandard


@dataclasses.dataclass(frozen=True, slots=True)
class Frames:
    """What :func:`decode_frames` read of a compact log.

    :ivar plain: the content of the complete frames, concatenated: the log's bytes.
    :ivar ends: each complete frame's end, as ``(byte in the file, byte in plain)``.
    :ivar size: the bytes decoded from (the file, or the part of it given).
    :ivar broken: the first incomplete frame failed to decode (corrupt), rather than
        being cut short (torn); ``False`` when every frame is complete.
    """

    plain: bytes
    ends: list[tuple[int, int]]
    size: int
    broken: bool = False

    @property
    def complete(self) -> int:
        """Where the complete frames end in the file (0 when none is)."""
        return self.ends[-1][0] if self.ends else 0

    def line_end(self) -> tuple[int, int]:
        """The last frame end that is also a line end, as ``(file, plain)``; ``(0, 0)``
        when there is none. Every frame this backend writes ends a line."""
        for file_end, plain_end in reversed(self.ends):
            if self.plain[plain_end - 1:plain_end] == b"\n":
                return file_end, plain_end
        return 0, 0


def decode_frames(data: bytes, start: int = 0) -> Frames:
    """The complete zstd frames of ``data`` from byte ``start`` on, up to the first that
    does not decode completely (see :class:`Frames`).

    A log that is whole frames, each saying its content's size (as this backend writes
    them), is decoded in one call; any other is walked frame by frame."""
    zstd = zstandard_module()
    whole = _whole_frames(zstd, data, start)
    if whole is not None:
        return whole
    decompressor = zstd.ZstdDecompressor()
    view = memoryview(data)
    parts: list[bytes] = []
    ends: list[tuple[int, int]] = []
    pos, produced, size = start, 0, len(data)
    while pos < size:
        frame = decompressor.decompressobj()
        out: list[bytes] = []
        at = pos
        try:
            while not frame.eof and at < size:
                piece = view[at:at + _CHUNK]
                at += len(piece)
                out.append(frame.decompress(piece))
        except zstd.ZstdError:
            return Frames(b"".join(parts), ends, size, broken=True)
        if not frame.eof:
            break  # cut short: a torn tail
        pos = at - len(frame.unused_data)
        content = b"".join(out)
        parts.append(content)
        produced += len(content)
        ends.append((pos, produced))
    return Frames(b"".join(parts), ends, size)


def _whole_frames(zstd: Any, data: bytes, start: int) -> Frames | None:
    """The common case: ``data`` from ``start`` is nothing but whole frames whose
    headers give their content's size. Their ends are found from their headers and
    block headers alone (RFC 8878, 3.1.1), then all are decoded in one call, which
    checks every frame's checksum; ``None`` when the log is anything else (the walk of
    :func:`decode_frames` then says what)."""
    ends: list[tuple[int, int]] = []
    pos, produced, size = start, 0, len(data)
    while pos < size:
        head = data[pos:pos + 18]  # the longest frame header
        try:
            at = pos + zstd.frame_header_size(head)
            content = zstd.frame_content_size(head)
        except zstd.ZstdError:
            return None
        if content < 0:
            return None  # a frame that does not say its size (not one of ours)
        last = 0
        while not last:
            if at + 3 > size:
                return None
            block = int.from_bytes(data[at:at + 3], "little")
            last, kind, length = block & 1, (block >> 1) & 3, block >> 3
            at += 3 + (1 if kind == 1 else length)  # an RLE block holds one byte
        at += 4 if data[pos + 4] & 4 else 0  # the content checksum, when there is one
        if at > size:
            return None
        produced += content
        ends.append((at, produced))
        pos = at
    try:
        plain = zstd.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
            data[start:] if start else data)
    except zstd.ZstdError:
        return None
    if len(plain) != produced:
        return None
    return Frames(plain, ends, size)


def read_plain(path: str) -> bytes:
    """A compact log's bytes (its complete frames decoded), as a plain log file's; what
    a search of a compact store reads.

    :raises FileNotFoundError: no file at ``path``.
    """
    return decode_file(path).plain


def decode_file(path: str, known_end: int | None = None) -> Frames:
    """The frames of a compact log file, up to its durable-end mark (:mod:`.end`,
    read first), or ``known_end`` (:func:`~.end.history_end`): the frames of a failed
    batch that could not be rolled back, whole or torn, are not the log's."""
    end = history_end(path, known_end)
    with open(path, "rb") as f:
        return decode_frames(f.read() if end is None else f.read(end))


def first_line(path: str) -> bytes | None:
    """A compact log's first line (without its newline), decoded from its first frame
    as far as it takes; ``None`` when it has none (or the file vanished, or is no
    frame)."""
    zstd = zstandard_module()
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed right below
    except FileNotFoundError:
        return None
    with f:
        frame = zstd.ZstdDecompressor().decompressobj()
        chunks: list[bytes] = []
        try:
            while not frame.eof and (data := f.read(_CHUNK)):
                chunk = frame.decompress(data)
                nl = chunk.find(b"\n")
                if nl >= 0:
                    chunks.append(chunk[:nl])
                    return b"".join(chunks)
                chunks.append(chunk)
        except zstd.ZstdError:
            return None  # not a frame: no complete first line
    return None


class _Frames:
    """A compact log's units for a follower (:class:`~._logformat.tail.Framing`): whole frames."""

    def end_before(self, f: BinaryIO, limit: int) -> int:
        f.seek(0)
        return decode_frames(f.read(limit)).line_end()[0]

    def moved(self, fd: int, offset: int) -> bool:
        # A frame starts where the follower stands, unless the file was rewritten (a
        # stray magic number there is a chance of one in 2**32).
        head = os.pread(fd, len(MAGIC), offset)
        return not MAGIC.startswith(head)

    def complete(self, chunk: bytes) -> tuple[int, bytes]:
        frames = decode_frames(chunk)
        file_end, plain_end = frames.line_end()
        return file_end, frames.plain[:plain_end]


#: The framing of a compact log (:func:`~._logformat.tail.follow_file`'s ``framing``).
FRAMES: Final[Framing] = _Frames()
