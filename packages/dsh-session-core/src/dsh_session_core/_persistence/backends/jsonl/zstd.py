"""The compact JSONL backend (``jsonl+zstd:``): the JSONL backend's logs, compressed.

It owns writing the compact log format and what a load makes of it (issue 17, point 4).

A compact log is a plain concatenation of zstd frames, one per durable write: the first
holds the header line and the first batch (published together, as the plain backend
publishes them: a temp file, then a hard link), and each later flush appends one frame
holding its batch. How the frames are decoded (every reader of a compact log: this
backend, the CLI on a file, a follower) is :mod:`dsh_session_core._logformat.frames`'.

Everything else is :class:`~.jsonl.backend.JsonlBackend`'s, through its file-format methods:
the buckets and the file names (``<id>.jsonl.zst`` instead of ``<id>.jsonl``), the
writer lock, append-or-roll-back (a failed write is cut back to the previous size, a
frame boundary), the atomic first write, deletion. Reading decodes the frames
(:func:`~.frames.decode_frames`) and then reads the log's bytes as the plain backend does, with
:func:`~.logfile.scan_log`; the rules of a torn tail are the plain format's, a frame
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
backend is made, never before (:func:`~.frames.zstandard_module`).
"""

from __future__ import annotations

import builtins
import dataclasses
import io
import os
import threading
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Final

from ...._logformat.frames import (
    FRAMES,
    MAGIC,
    Frames,
    decode_file,
    decode_frames,
    first_line,
    read_plain,
    zstandard_module,
)
from ...._logformat.logfile import (
    LogCounts,
    ScanResult,
    count_file,
    last_lines,
    line_wire,
    scan_log,
)
from ...._logformat.tail import FilePosition, follow_file
from ...._schema.header import SessionHeader
from ...._schema.registry import EventRegistry
from ....errors import LogFormatError
from ....events import Event
from ...base import POLL_SECONDS, LogNews, LogTail
from . import buckets, files
from .backend import JsonlBackend
from .ends import MAX_TAIL
from .paths import COMPACT_SUFFIX

if TYPE_CHECKING:
    from ...._search import SearchHit, SearchQuery

__all__ = ["LEVEL", "FrameCut", "JsonlZstdBackend"]

#: The zstd compression level of every frame: on the standard workload (a frame per
#: turn of 48 events, ~7 KB) level 3, zstd's default, makes the log about a tenth of
#: its plain size; higher levels gain little on frames this small (bench/zstd.py).
LEVEL: Final = 3


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


class JsonlZstdBackend(JsonlBackend):
    """Sessions as compact JSONL logs under ``root`` (see the module docstring): a
    :class:`~.jsonl.backend.JsonlBackend` whose files are zstd frames.

    :param root: the store's folder: a compact store's, or one holding no bucket yet.
    :param level: the zstd level of the frames written.
    :raises MissingExtraError: ``zstandard`` is not installed.
    :raises StoreKindError: ``root`` is a plain JSONL store's folder.
    """

    name = "session-persistence-jsonl-zstd"
    suffix = COMPACT_SUFFIX
    _url_scheme = "jsonl+zstd"

    def __init__(self, root: str | os.PathLike[str], *, level: int = LEVEL) -> None:
        self._zstd = zstandard_module()  # first: without it, nothing else matters
        self.level = level
        # Compressors are not thread-safe: one per thread (the backend serves several).
        self._local = threading.local()
        self._marked = False
        super().__init__(root)

    # -- the file format (see JsonlBackend) --

    def _check_kind(self) -> None:
        buckets.check_kind(self.root, compact=True)

    def _prepare_root(self) -> None:
        if not self._marked:
            buckets.mark_compact(self.root)
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
        """The first line, decoded from the first frame as far as it takes
        (:func:`~.frames.first_line`)."""
        return first_line(path)

    def _count(self, path: str) -> LogCounts:
        frames = decode_file(path)
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
        self._writer.truncate(header.id, path, torn.size)
        self._writer.append(header.id, path, torn.keep + jsonl, torn.first_seq)

    # -- reading: the whole log is decoded (a frame is found only from the start) --

    def _lines_since_read(self, header: SessionHeader, path: str, last: Event
                          ) -> builtins.list[bytes] | None:
        """:meth:`~.base.Backend.lines_since` by the protocol's default: the log is
        decoded whole to tell a torn frame (a frame cannot be found from the end). Only
        when the file is not as this backend left it (:meth:`JsonlBackend.lines_since`)."""
        from ...base import Backend

        return Backend.lines_since(self, header, last)

    def _tail(self, path: str, count: int) -> LogTail:
        """The last ``count`` complete lines: the log decoded whole, then read from its
        end; the position is the end of the last whole frame read."""
        frames = decode_file(path, self._writer.unmarked_end(path))
        file_end, plain_end = frames.line_end()
        lines = last_lines(io.BytesIO(frames.plain), plain_end, count)
        return LogTail(lines, FilePosition(path, file_end))

    def _lines_of_types(self, path: str, types: Collection[str]
                        ) -> builtins.list[bytes] | None:
        """The lines of those types: the log decoded whole, then searched as a plain
        log is (:func:`~.ranges.lines_of_types_in`)."""
        from ...._logformat.ranges import lines_of_types_in

        return lines_of_types_in(decode_file(path, self._writer.unmarked_end(path)).plain, types)

    def _lines_after(self, path: str, after: int, limit: int | None
                     ) -> builtins.list[bytes] | None:
        """The lines after seq ``after``: the log decoded whole, then searched as a
        plain log is (:func:`~.ranges.lines_in`)."""
        from ...._logformat.ranges import lines_in

        frames = decode_file(path, self._writer.unmarked_end(path))
        return lines_in(io.BytesIO(frames.plain), len(frames.plain), after, limit)

    def follow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> Iterator[LogNews]:
        """Follow the log file, frame by frame (:func:`~._logformat.tail.follow_file`): only
        the frames that arrive are decoded."""
        return follow_file(position, timeout=timeout, poll=POLL_SECONDS, framing=FRAMES)

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """:meth:`JsonlBackend.search`, each log decoded whole
        (:func:`~.frames.read_plain`)."""
        from .scan import scan_files

        return scan_files(self.root, self._search_paths(query), query, read=read_plain)
