"""``dsh-session tail``: the last events of a session, and with ``-f`` every new one.

Tail reads only the end of a log, through the backend's
:meth:`~.._persistence.base.Backend.tail_lines` (a JSONL file backwards from its end, a
database session by its last rows); a log file given as SOURCE is read the same way by
:func:`~._logformat.tail.tail_file`. It never decodes events into types (it
describes each line from its wire shape), never writes and never takes the writer lock,
so it can follow a live session without disturbing its writer.

Following is the backend's :meth:`~.._persistence.base.Backend.follow_lines`, which
waits its own way: JSONL (and a log file) and SQLite poll, PostgreSQL LISTENs on the
session's NOTIFY channel. Only complete lines are printed (a torn last line once its
newline arrives); when the log is cut back (``repair`` cut a torn tail) or rewritten
under the follower, the backend's note says so and following goes on. It stops only
when interrupted (Ctrl-C exits 130, as every command) or killed.

``-f`` follows what exists: a session (or file) that does not is refused. ``-F`` (GNU
tail's ``--follow=name --retry``) waits for it: for the store to exist, then for the
session to appear (one warning line says it is waiting, another when it appeared),
prints it from its first event (nothing it holds is skipped, whatever ``-n`` says), and
follows it as ``-f`` does. For a session that exists, ``-F`` is ``-f``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .._inspect.describe import describe, field
from .._logformat.logfile import line_wire
from .._logformat.tail import follow_file, tail_file
from .._persistence.base import POLL_SECONDS
from ..errors import StoreNotFoundError
from .source import (
    check_session_id,
    find_stored,
    is_log_file,
    not_found,
    open_backend,
    refuse_sealed,
    resolve,
    store_url,
    warn,
)
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
    for item in news:
        if item.note is not None:
            warn(item.note)
        emit(item.lines)


def _tail_file(path: str, n: int, follow: bool, emit: Emit) -> int:
    try:
        tail = tail_file(path, n)
        emit(tail.lines)
        if follow:
            _follow(follow_file(tail.position), emit)
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    return EXIT_OK


def _tail_stored(session_id: str, url: str, n: int, follow: bool, retry: bool,
                 emit: Emit) -> int:
    backend, waited = _wait_for_store(url) if retry else (open_backend(url), False)
    try:
        # Its id, its name or an id prefix (-F waits for the text as an id when none is).
        session_id = find_stored(backend, session_id, url, prefixes=True)
        check_session_id(backend, session_id)
        # All of it once waited for: a session that appeared (with its store, or after
        # it) may already hold more than -n, and all of it is new to the reader.
        tail = backend.tail_lines(session_id, _ALL if waited else n)
        if tail is None:
            if not retry:
                raise not_found(session_id, url)
            warn(f'no session "{session_id}" in {url} yet: waiting for it (-F)')
            while tail is None:
                time.sleep(POLL_SECONDS)  # as the JSONL and SQLite followers poll
                tail = backend.tail_lines(session_id, _ALL)
            waited = True
        if waited:  # said whether the store or the session was waited for
            warn(f'session "{session_id}" has appeared in {url}: following it')
        refuse_sealed(backend, session_id)
        emit(tail.lines)
        if follow:
            _follow(backend.follow_lines(session_id, tail.position), emit)
    except OSError as exc:
        msg = f"cannot read {exc.filename or url}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    finally:
        backend.close()
    return EXIT_OK


#: "Every event" as a count for ``tail_lines`` (an int64, which every backend takes).
_ALL = 2**62


def _wait_for_store(url: str) -> tuple[Any, bool]:
    """The store's backend, once it exists (``-F``): a store the first session written
    to it makes (a SQLite file, a PostgreSQL database's tables) is waited for too. With
    it, whether it had to be waited for."""
    said = False
    while True:
        try:
            return open_backend(url), said
        except Failure as exc:
            if not isinstance(exc.__cause__, StoreNotFoundError):
                raise
        if not said:
            warn(f"no store at {url} yet: waiting for it (-F)")
            said = True
        time.sleep(POLL_SECONDS)


def _wait_for_file(path: str) -> None:
    """Until ``path`` is a log file (``-F --file``)."""
    if is_log_file(path):
        return
    warn(f"no log file {path} yet: waiting for it (-F)")
    while not is_log_file(path):
        time.sleep(POLL_SECONDS)
    warn(f"{path} has appeared: following it")


def run_tail(args: argparse.Namespace) -> int:
    emit = _emitter(args.json)
    source: str = args.source
    if args.lines < 0:
        msg = f"-n takes a count of events, got {args.lines}"
        raise Failure(msg, EXIT_USAGE)
    retry: bool = args.retry
    follow: bool = args.follow or retry
    if follow:
        # Ctrl-C is how a person stops following, even when started from a shell that
        # set SIGINT to be ignored (a background job of a script): listen to it again.
        # It goes up to main: exit 130, as in every command.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if retry and getattr(args, "as_file", False):
        _wait_for_file(source)
    if resolve(source, args) == "file":
        return _tail_file(source, args.lines, follow, emit)
    return _tail_stored(source, store_url(args), args.lines, follow, retry, emit)
