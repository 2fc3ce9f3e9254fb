"""``dsh-session tail``: the last events of a session, and with ``-f`` every new one.

Tail reads only the end of a log, through the backend's
:meth:`~.._persistence.base.Backend.tail_lines` (a JSONL file backwards from its end, a
database session by its last rows); a log file given as SOURCE is read the same way by
:func:`~.._persistence.files.tail_file`. It never decodes events into types (it
describes each line from its wire shape), never writes and never takes the writer lock,
so it can follow a live session without disturbing its writer.

Following is the backend's :meth:`~.._persistence.base.Backend.follow_lines`, which
waits its own way: JSONL (and a log file) and SQLite poll, PostgreSQL LISTENs on the
session's NOTIFY channel. Only complete lines are printed (a torn last line once its
newline arrives); when the log is cut back (``repair`` cut a torn tail) or rewritten
under the follower, the backend's note says so and following goes on. It stops only
when interrupted (Ctrl-C exits 0) or killed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .support import EXIT_OK, EXIT_USAGE, Failure, write
from .term import Style, printable, shorten, terminal_width

if TYPE_CHECKING:
    from .._persistence.base import LogNews

__all__ = ["run_tail"]

Emit = Callable[[Iterable[bytes]], None]


def _clock(ms: Any) -> str:
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return "?" * 12
    try:
        return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{int(ms) % 1000:03d}"
    except (OverflowError, OSError, ValueError):
        return "?" * 12


def _emitter(as_json: bool) -> Emit:
    from .._logfile import line_wire
    from .describe import describe, field
    from .source import warn

    style = Style.for_stream(sys.stdout)
    width = terminal_width()

    def emit(lines: Iterable[bytes]) -> None:
        out: list[bytes] = []
        for line in lines:
            wire = line_wire(line)
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


def _follow(news: Iterator[LogNews], emit: Emit) -> None:
    from .source import warn

    for item in news:
        if item.note is not None:
            warn(item.note)
        emit(item.lines)


def _tail_file(path: str, n: int, follow: bool, emit: Emit) -> int:
    from .._persistence.files import follow_file, tail_file

    try:
        tail = tail_file(path, n)
        emit(tail.lines)
        if follow:
            _follow(follow_file(tail.position), emit)
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    return EXIT_OK


def _tail_stored(session_id: str, url: str, n: int, follow: bool, emit: Emit) -> int:
    from .source import check_session_id, not_found, open_backend

    backend = open_backend(url)
    try:
        check_session_id(backend, session_id)
        tail = backend.tail_lines(session_id, n)
        if tail is None:
            raise not_found(session_id, url)
        emit(tail.lines)
        if follow:
            _follow(backend.follow_lines(session_id, tail.position), emit)
    except OSError as exc:
        msg = f"cannot read {exc.filename or url}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    finally:
        backend.close()
    return EXIT_OK


def run_tail(args: argparse.Namespace) -> int:
    from .source import resolve, store_url

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
        if resolve(source, args) == "file":
            return _tail_file(source, args.lines, args.follow, emit)
        return _tail_stored(source, store_url(args), args.lines, args.follow, emit)
    except KeyboardInterrupt:  # Ctrl-C is how a person stops following
        return EXIT_OK
