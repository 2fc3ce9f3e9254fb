"""The compact JSONL backend (``jsonl+zstd:``): the JSONL backend's logs, compressed
(issue 17, point 4). It owns the compact log format and its reading.

A compact log is a plain concatenation of zstd frames, one per durable write: the first
holds the header line and the first batch (published together, as the plain backend
publishes them: a temp file, then a hard link), and each later flush appends one frame
holding its batch. Decompressed, the frames are the plain log's bytes exactly, so
``zstd -dc`` of a compact log is the reference's JSONL log. Every frame is whole on its
own (no dictionary, no window shared with another frame) and carries a checksum of its
content.

Everything else is :class:`~.jsonl.JsonlBackend`'s, through its file-format methods:
the buckets and the file names (``<id>.jsonl.zst`` instead of ``<id>.jsonl``), the
writer lock, append-or-roll-back (a failed write is cut back to the previous size, a
frame boundary), the atomic first write, deletion. Reading decodes the frames
(:func:`decode_frames`) and then reads the log's bytes as the plain backend does, with
:func:`~.._logfile.scan_log`; the rules of a torn tail are the plain format's, a frame
standing for a line:

- the frames are read up to the first that does not decode completely (cut short, or
  failing its checksum); that frame and whatever follows it is a torn tail, cut by the
  next writer, unless a later frame that does decode holds a ``turn/end``: the hole is
  then inside the committed region, and the log is refused (:class:`LogFormatError`);
- inside the decoded bytes, :func:`scan_log` rules as for a plain log. A torn tail
  starting inside a frame (only a log written by hand can hold a line that does not
  parse inside a whole frame) is cut at the frame's start, and the frame's lines kept
  before the hole are written again as a new frame (:class:`FrameCut`).

A frame cannot be found from the end of a file without reading what precedes it, so the
reads that a plain log answers from a part of the file (``tail``, ``read``, the counts of
``ls``, a search) decode the whole log here: O(log size), at some hundreds of MB/s. The
first line (listing) is decoded from the first frame alone, and a follower decodes only
the frames that arrive.

``zstandard`` is an extra (``pip install 'dsh-session-core[zstd]'``), imported when a
backend is made, never before.
"""

from __future__ import annotations

import builtins
import dataclasses
import io
import os
import threading
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from .._header import SessionHeader
from .._logfile import LogCounts, ScanResult, count_file, last_lines, line_wire, scan_log
from .._registry import EventRegistry
from ..errors import LogFormatError, MissingExtraError
from ..events import Event
from . import files
from .base import POLL_SECONDS, LogNews, LogTail
from .endmark import durable_end
from .jsonl import MAX_TAIL, JsonlBackend

if TYPE_CHECKING:
    from .._search import SearchHit, SearchQuery

__all__ = [
    "LEVEL",
    "MAGIC",
    "FrameCut",
    "Frames",
    "JsonlZstdBackend",
    "decode_frames",
    "read_plain",
    "zstandard_module",
]

#: The zstd compression level of every frame: on the standard workload (a frame per
#: turn of 48 events, ~7 KB) level 3, zstd's default, makes the log about a tenth of
#: its plain size; higher levels gain little on frames this small (bench/zstd.py).
LEVEL: Final = 3

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
    return _decode_file(path).plain


def _decode_file(path: str) -> Frames:
    """The frames of a compact log file, up to its durable-end mark (:mod:`.endmark`,
    read first): the frames of a failed batch that could not be rolled back, whole or
    torn, are not the log's."""
    end = durable_end(path)
    with open(path, "rb") as f:
        return decode_frames(f.read() if end is None else f.read(end))


def _turn_end_after(data: bytes, bad: int) -> bool:
    """Whether a frame after the undecodable one at ``bad`` decodes and holds a
    ``turn/end`` line (the hole is then committed). Frames are found by their magic
    number: a corrupt frame gives no length to skip."""
    at = data.find(MAGIC, bad + 1)
    while at >= 0:
        later = decode_frames(data, at)
        if later.ends:
            lines = later.plain.split(b"\n")
            return any((wire := line_wire(line)) is not None and wire.get("type") == "turn/end"
                       for line in lines)
        at = data.find(MAGIC, at + 1)
    return False


@dataclasses.dataclass(frozen=True, slots=True)
class FrameCut:
    """A compact log's torn tail that starts inside a frame (the ``torn`` marker of
    :class:`~.base.StoredLog`): the file is cut back to the frame's start, then its
    lines before the hole are written again, as a new frame.

    :ivar size: where the frame starts in the file.
    :ivar keep: the frame's lines before the hole (each ``\\n``-ended).
    :ivar first_seq: the seq of the first of them.
    """

    size: int
    keep: bytes
    first_seq: int


def _torn(frames: Frames, committed: int) -> object | None:
    """The torn marker of a log whose decoded bytes are committed up to ``committed``."""
    if committed >= len(frames.plain):
        return None if frames.complete == frames.size else frames.complete
    file_start = plain_start = 0
    for file_end, plain_end in frames.ends:
        if committed < plain_end:
            break
        file_start, plain_start = file_end, plain_end
    if committed == plain_start:
        return file_start
    # Lines before the frame, less the header: the seq of its first line.
    first_seq = frames.plain.count(b"\n", 0, plain_start) - 1
    return FrameCut(file_start, frames.plain[plain_start:committed], first_seq)


def _check_rest(frames: Frames, data: bytes, path: str) -> None:
    """Refuse a log whose undecodable frame lies in the committed region, or whose very
    first frame does not decode (it holds the header: no log without it)."""
    if frames.complete == frames.size:
        return
    line = frames.plain.count(b"\n") + 1
    if not frames.ends:
        how = "is corrupt" if frames.broken else "is cut short"
        msg = (f"corrupt compact session log: its first zstd frame (the header's) {how}; "
               f"`zstd -t FILE` tests the frames")
        raise LogFormatError(msg, path=path, line=1)
    if _turn_end_after(data, frames.complete):
        msg = (f"corrupt compact session log: the zstd frame at byte {frames.complete} "
               f"(from line {line}) does not decode, and a turn/end follows it: it is "
               f"inside the committed region; `zstd -t FILE` tests the frames")
        raise LogFormatError(msg, path=path, line=line)


class _Frames:
    """A compact log's units for a follower (:class:`~.files.Framing`): whole frames."""

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


_FRAMES: Final = _Frames()


class JsonlZstdBackend(JsonlBackend):
    """Sessions as compact JSONL logs under ``root`` (see the module docstring): a
    :class:`~.jsonl.JsonlBackend` whose files are zstd frames.

    :param root: the store's folder: a compact store's, or one holding no bucket yet.
    :param level: the zstd level of the frames written.
    :raises MissingExtraError: ``zstandard`` is not installed.
    :raises StoreKindError: ``root`` is a plain JSONL store's folder.
    """

    name = "session-persistence-jsonl-zstd"
    suffix = files.COMPACT_SUFFIX

    def __init__(self, root: str | os.PathLike[str], *, level: int = LEVEL) -> None:
        self._zstd = zstandard_module()  # first: without it, nothing else matters
        self.level = level
        # Compressors are not thread-safe: one per thread (the backend serves several).
        self._local = threading.local()
        self._marked = False
        super().__init__(root)

    # -- the file format (see JsonlBackend) --

    def _check_kind(self) -> None:
        files.check_kind(self.root, compact=True)

    def _prepare_root(self) -> None:
        if not self._marked:
            files.mark_compact(self.root)
            self._marked = True

    def _encode(self, plain: bytes) -> bytes:
        compressor = getattr(self._local, "compressor", None)
        if compressor is None:
            compressor = self._local.compressor = self._zstd.ZstdCompressor(
                level=self.level, write_checksum=True, write_content_size=True)
        frame: bytes = compressor.compress(plain)
        return frame

    def _end_of(self, plain: bytes, written: bytes) -> bytes | None:
        """A batch's whole frame: a log ending with it ends with the batch's last line."""
        return written if len(written) <= MAX_TAIL else None

    def _scan(self, data: bytes, registry: EventRegistry, path: str
              ) -> tuple[ScanResult, object | None]:
        frames = decode_frames(data)
        _check_rest(frames, data, path)
        scan = scan_log(frames.plain, registry, path=path)
        return scan, _torn(frames, scan.committed_bytes)

    def _read_plain(self, path: str) -> bytes | None:
        data = files.read_if_exists(path)
        if data is None:
            return None
        frames = decode_frames(data)
        # Only a log that is nothing but whole frames is the bytes it decodes to.
        return frames.plain if frames.complete == len(data) else None

    def _seq_before(self, path: str, end: int) -> int | None:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            data = f.read(end)
        frames = decode_frames(data)
        if len(data) != end or frames.complete != end:
            return None  # not cut at a frame's end
        return files.last_seq(io.BytesIO(frames.plain), len(frames.plain))

    def _first_line(self, path: str) -> bytes | None:
        """The first line, decoded from the first frame as far as it takes."""
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed right below
        except FileNotFoundError:
            return None
        with f:
            frame = self._zstd.ZstdDecompressor().decompressobj()
            chunks: list[bytes] = []
            try:
                while not frame.eof and (data := f.read(_CHUNK)):
                    chunk = frame.decompress(data)
                    nl = chunk.find(b"\n")
                    if nl >= 0:
                        chunks.append(chunk[:nl])
                        return b"".join(chunks)
                    chunks.append(chunk)
            except self._zstd.ZstdError:
                return None  # not a frame: no complete first line
        return None

    def _count(self, path: str) -> LogCounts:
        frames = _decode_file(path)
        counts = count_file(io.BytesIO(frames.plain))
        return counts._replace(torn=counts.torn or frames.complete < frames.size)

    # -- repairing --

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """:meth:`JsonlBackend.commit_repair`, and a torn tail that starts inside a frame
        (:class:`FrameCut`): cut back to the frame's start, then its kept lines and the
        closers are appended as one frame."""
        if not isinstance(torn, FrameCut):
            super().commit_repair(header, torn, closers, jsonl)
            return
        path = self.location(header)
        self._truncate(header.id, path, torn.size)
        self._append(header.id, path, torn.keep + jsonl, torn.first_seq)

    # -- reading: the whole log is decoded (a frame is found only from the start) --

    def _lines_since_read(self, header: SessionHeader, path: str, last: Event
                          ) -> builtins.list[bytes] | None:
        """:meth:`~.base.Backend.lines_since` by the protocol's default: the log is
        decoded whole to tell a torn frame (a frame cannot be found from the end). Only
        when the file is not as this backend left it (:meth:`JsonlBackend.lines_since`)."""
        from .base import Backend

        return Backend.lines_since(self, header, last)

    def _tail(self, path: str, count: int) -> LogTail:
        """The last ``count`` complete lines: the log decoded whole, then read from its
        end; the position is the end of the last whole frame read."""
        frames = _decode_file(path)
        file_end, plain_end = frames.line_end()
        lines = last_lines(io.BytesIO(frames.plain), plain_end, count)
        return LogTail(lines, files.FilePosition(path, file_end))

    def _lines_of_types(self, path: str, types: Collection[str]
                        ) -> builtins.list[bytes] | None:
        """The lines of those types: the log decoded whole, then searched as a plain
        log is (:func:`~.ranges.lines_of_types_in`)."""
        from .ranges import lines_of_types_in

        return lines_of_types_in(_decode_file(path).plain, types)

    def _lines_after(self, path: str, after: int, limit: int | None
                     ) -> builtins.list[bytes] | None:
        """The lines after seq ``after``: the log decoded whole, then searched as a
        plain log is (:func:`~.ranges.lines_in`)."""
        from .ranges import lines_in

        frames = _decode_file(path)
        return lines_in(io.BytesIO(frames.plain), len(frames.plain), after, limit)

    def follow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> Iterator[LogNews]:
        """Follow the log file, frame by frame (:func:`~.files.follow_file`): only the
        frames that arrive are decoded."""
        return files.follow_file(position, timeout=timeout, poll=POLL_SECONDS,
                                 framing=_FRAMES)

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """:meth:`JsonlBackend.search`, each log decoded whole (:func:`read_plain`)."""
        from .search import scan_files

        return scan_files(self.root, self._search_paths(query), query, read=read_plain)
