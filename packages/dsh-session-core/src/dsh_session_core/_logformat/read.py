"""Reading one log file into a :class:`~dsh_session_core.Session`: :func:`read_session`.

This module owns only that public call. How a log is parsed is :mod:`.logfile`'s (as is, or
as a durable backend loads it), and how an interrupted turn is closed is crash repair's
(:mod:`._model.repair`); a store folder is opened through ``open_store`` instead.
"""

from __future__ import annotations

__all__ = ["read_session"]

import os
from typing import TYPE_CHECKING

from .._model.repair import interrupted_turn_closers
from .._schema.codec import encode_events
from ..errors import LogFormatError
from .logfile import open_session, parse_log, scan_log

if TYPE_CHECKING:
    from .._model.session import Clock, Session
    from .._schema.registry import EventRegistry


def read_session(
    path: str | os.PathLike[str],
    *,
    registry: EventRegistry | None = None,
    recover: bool = False,
    clock: Clock | None = None,
) -> Session:
    """Read a JSONL log file (the reference's format: a header line, then one event per
    line) into a bare, in-memory :class:`~dsh_session_core.Session`.

    The session is not bound to any store: what it appends stays in memory (write it
    with ``session.to_jsonl()``, or resume the log through a store to keep writing it
    durably). Events no installed plugin knows are kept verbatim, as opaque events.

    :param path: the log file.
    :param registry: the event types to read it with; by default those of the installed
        plugins (what ``SessionStore()`` would use).
    :param recover: read it as a durable store loads it: a torn last line is cut, and a
        last turn a crash left open is closed in memory (``interrupted``, with a
        synthetic error result for each unanswered tool call); the file is untouched.
        Without it, the file must be whole.
    :param clock: the clock of later appends (epoch milliseconds).
    :raises OSError: the file cannot be read.
    :raises LogFormatError: the file is no log (empty, a bad header), or, without
        ``recover``, a line is not JSON; with it, committed corruption.
    """
    if registry is None:
        from .._plugins.manager import PluginHooks, create_plugin_manager

        registry = PluginHooks(create_plugin_manager()).build_registry()
    name = os.fspath(path)
    with open(name, "rb") as f:
        data = f.read()
    if not recover:
        try:
            log = parse_log(data, registry, path=name)
        except LogFormatError as exc:
            if exc.line is None or exc.line <= 1:
                raise  # no header: nothing a recovery could keep
            msg = (f"{name}: {exc}; to read it as a store loads it (a torn tail cut, "
                   f"an interrupted turn closed), pass recover=True")
            raise LogFormatError(msg, path=name, line=exc.line) from exc
        session = open_session(log, registry)
    else:
        from .._model.session import Session

        scan = scan_log(data, registry, path=name)
        closers = interrupted_turn_closers(scan.events)
        session = Session(
            scan.header.id,
            [*scan.events, *closers],
            scan.header,
            registry=registry,
            seed_jsonl=scan.jsonl + encode_events(closers),
        )
    if clock is not None:
        session.clock = clock
    return session
