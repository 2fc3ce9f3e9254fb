"""``dsh-session tail``: the last events of a session, and with ``-f`` every new one.

Tail reads only the end of a log: a JSONL file is read backwards from its end, a SQLite
or PostgreSQL session by its last rows. It never decodes events into types (it describes each line
from its wire shape), never writes and never takes the writer lock, so it can follow a
live session without disturbing its writer.

Following polls, since a follower legitimately waits for data: every ``POLL_SECONDS`` it
compares the file's size with what it has read (SQLite: asks for rows past the last seq
shown) and prints the new *complete* lines only; a torn last line is printed once its
newline arrives. When the log shrinks (``repair`` cut a torn tail), it says so and
follows from the new end; when it was cut and regrew between two polls (the byte before
the follower's position is no longer a newline), from the start of the line now there.
It stops only when interrupted (Ctrl-C exits 0) or killed.

A PostgreSQL session is not polled: the follower LISTENs on the session's channel, which
every committed batch (and repair) notifies, and reads the new rows only then.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, BinaryIO

from .support import EXIT_OK, EXIT_USAGE, Failure, write
from .term import Style, printable, shorten, terminal_width

if TYPE_CHECKING:
    from .._persistence.postgres import PostgresBackend
    from .._persistence.sqlite import SqliteBackend

__all__ = ["POLL_SECONDS", "run_tail"]

#: How often a follower looks for new events: well under the one second a person (and
#: the acceptance test) will wait, and a stat call costs microseconds.
POLL_SECONDS = 0.1

Emit = Callable[[Iterable[bytes]], None]


def _wire(line: bytes) -> dict[str, Any] | None:
    """A log line's wire shape, or ``None`` when it is not a JSON object."""
    import json

    import msgspec

    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError:
        try:  # lone surrogate escapes, which msgspec refuses and JavaScript writes
            value = json.loads(line.decode("utf-8", "surrogatepass"))
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _clock(ms: Any) -> str:
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return "?" * 12
    try:
        return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{int(ms) % 1000:03d}"
    except (OverflowError, OSError, ValueError):
        return "?" * 12


def _emitter(as_json: bool) -> Emit:
    from .describe import describe, field
    from .source import warn

    style = Style.for_stream(sys.stdout)
    width = terminal_width()

    def emit(lines: Iterable[bytes]) -> None:
        out: list[bytes] = []
        for line in lines:
            wire = _wire(line)
            if as_json:
                if wire is None:
                    warn(f"skipped a line that is not a JSON object ({len(line)} bytes)")
                else:
                    out.append(line + b"\n")
                continue
            if wire is None:
                text = f"{'?':>6}  {'':12}  {style('(not a JSON object)', 'red')}"
            else:
                kind = printable(field(wire.get("type")))
                room = width - 44
                text = (f"{style(field(wire.get('seq')).rjust(6), 'dim')}  "
                        f"{style(_clock(wire.get('time')), 'dim')}  {kind:<20} "
                        f"{shorten(describe(wire), room)}")
            out.append(text.encode("utf-8", "replace") + b"\n")
        if out:
            write(b"".join(out))
            sys.stdout.flush()

    return emit


# --- files ------------------------------------------------------------------------------


def _complete_end(f: BinaryIO, size: int) -> int:
    """Where the file's last complete line ends (0 when it has none)."""
    pos = size
    while pos > 0:
        step = min(65536, pos)
        f.seek(pos - step)
        nl = f.read(step).rfind(b"\n")
        if nl >= 0:
            return pos - step + nl + 1
        pos -= step
    return 0


def _tail_file(path: str, n: int, follow: bool, emit: Emit) -> int:
    from .source import last_lines, warn

    try:
        f = open(path, "rb")  # noqa: SIM115 - kept open while following
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    with f:
        fd = f.fileno()
        offset = _complete_end(f, os.fstat(fd).st_size)
        emit(last_lines(f, offset, n))
        # Without a complete line yet, the first line to arrive is the header.
        header_pending = offset == 0
        while follow:
            size = os.fstat(fd).st_size
            if size < offset:
                offset = _complete_end(f, size)
                warn(f"the log was cut back to {size} bytes (a repair?); following from "
                     f"there")
                continue
            if size == offset:
                time.sleep(POLL_SECONDS)
                continue
            if offset and os.pread(fd, 1, offset - 1) != b"\n":
                # Cut and regrown between two polls: what we read up to is no longer a
                # line end. Go back to the start of the line that is there now.
                offset = _complete_end(f, offset - 1)
                warn("the log was rewritten under the follower; following from the "
                     "last complete line")
            f.seek(offset)
            chunk = f.read(size - offset)
            cut = chunk.rfind(b"\n") + 1  # complete lines only: a torn line waits
            if not cut:
                time.sleep(POLL_SECONDS)
                continue
            offset += cut
            lines = chunk[: cut - 1].split(b"\n")
            if header_pending:
                lines, header_pending = lines[1:], False
            emit(lines)
    return EXIT_OK


def _jsonl_log(root: str, session_id: str) -> str | None:
    """The log file of a session in a JSONL store (any bucket), as ``load_stored``
    finds it; ``None`` when there is none."""
    from .._persistence.paths import encode_segment

    try:
        name = encode_segment(session_id) + ".jsonl"
        buckets = os.scandir(root)
    except (FileNotFoundError, ValueError):
        return None
    with buckets:
        for bucket in buckets:
            path = os.path.join(bucket.path, name)
            if bucket.is_dir() and os.path.isfile(path):
                return path
    return None


# --- SQLite -----------------------------------------------------------------------------

_ROWS = "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"


def _tail_sqlite(
    backend: SqliteBackend, session_id: str, url: str, n: int, follow: bool, emit: Emit
) -> int:
    from .._persistence.rows import _row_line
    from .source import not_found, warn

    conn = backend._conn  # read-only queries; autocommit, so each sees the latest commit
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise not_found(session_id, url)
    rows = conn.execute(f"{_ROWS} WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                        (session_id, max(n, 0))).fetchall()
    emit(_row_line(row) for row in reversed(rows))
    (last,) = conn.execute("SELECT max(seq) FROM events WHERE session_id = ?",
                           (session_id,)).fetchone()
    last = -1 if last is None else last
    while follow:
        rows = conn.execute(f"{_ROWS} WHERE session_id = ? AND seq > ? ORDER BY seq",
                            (session_id, last)).fetchall()
        if rows:
            emit(_row_line(row) for row in rows)
            last = rows[-1][0]
            continue
        (top,) = conn.execute("SELECT max(seq) FROM events WHERE session_id = ?",
                              (session_id,)).fetchone()
        if top is not None and top < last:
            warn(f"the session was cut back to seq {top} (a repair?); following from there")
            last = top
        time.sleep(POLL_SECONDS)
    return EXIT_OK


# --- PostgreSQL -------------------------------------------------------------------------


def _tail_postgres(
    backend: PostgresBackend, session_id: str, url: str, n: int, follow: bool, emit: Emit
) -> int:
    """The last ``n`` events, then (following) each commit as its NOTIFY arrives: the
    events table is read only when the writer said something changed."""
    from .source import not_found, warn

    lines = backend.tail(session_id, n)
    if lines is None:
        raise not_found(session_id, url)
    emit(lines)
    if not follow:
        return EXIT_OK
    last = backend.last_seq(session_id)
    for top, new in backend.follow(session_id, last):
        if new:
            emit(new)
        elif top < last:
            warn(f"the session was cut back to seq {top} (a repair?); following from there")
        last = top
    return EXIT_OK


def run_tail(args: argparse.Namespace) -> int:
    from .source import is_log_file, not_found, open_backend, store_url

    emit = _emitter(args.json)
    source: str = args.source
    if args.lines < 0:
        msg = f"-n takes a count of events, got {args.lines}"
        raise Failure(msg, EXIT_USAGE)
    if args.follow:
        import signal

        # Ctrl-C is how a person stops following, even when started from a shell that
        # set SIGINT to be ignored (a background job of a script): listen to it again.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if is_log_file(source):
            return _tail_file(source, args.lines, args.follow, emit)
        url = store_url(args)
        backend = open_backend(url)
        try:
            root = getattr(backend, "root", None)
            if isinstance(root, str):  # the JSONL backend: follow the file itself
                path = _jsonl_log(root, source)
                if path is None:
                    raise not_found(source, url)
                return _tail_file(path, args.lines, args.follow, emit)
            from .._persistence.postgres import PostgresBackend  # psycopg: only on connect
            from .._persistence.sqlite import SqliteBackend

            if isinstance(backend, SqliteBackend):
                return _tail_sqlite(backend, source, url, args.lines, args.follow, emit)
            if isinstance(backend, PostgresBackend):
                return _tail_postgres(backend, source, url, args.lines, args.follow, emit)
            msg = f"cannot tail a session in {url}: unsupported store"
            raise Failure(msg)
        finally:
            backend.close()
    except KeyboardInterrupt:  # Ctrl-C is how a person stops following
        return EXIT_OK
