"""``dsh-session derive``, ``export``, ``validate`` and ``repair``: commands on log files."""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    Failure,
    load_session,
    log_hint,
    one_line,
    read_file,
    read_log,
    registry,
    write,
)

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from .._logfile import ScanResult
    from .._registry import EventRegistry
    from .._session import Session
    from ..events import Event

__all__ = ["add_commands"]

#: What to try when a log does not read as is.
_LOG_HINT = (
    "`dsh-session validate FILE` names every bad event; a crashed log reads with --recover "
    "and is fixed by `dsh-session repair FILE`"
)



_STRICT_NOTE = " (strict: unknown event types and opaque payloads are errors)"


def _recovered(path: str, reg: EventRegistry) -> tuple[ScanResult, list[Event]]:
    """A log file read by the JSONL backend's load rules: its scan (torn tail dropped)
    and the closers that close an interrupted turn (nothing is written)."""
    from .._header import SESSION_FORMAT_VERSION
    from .._logfile import scan_log
    from .._persistence.coordinator import PersistenceError
    from .._persistence.repair import interrupted_turn_closers

    scan = scan_log(read_file(path), reg, path=path)
    if scan.header.version != SESSION_FORMAT_VERSION:
        msg = (
            f"unsupported session format version {scan.header.version} for "
            f'"{scan.header.id}" (only v{SESSION_FORMAT_VERSION} is supported)'
        )
        raise PersistenceError(msg, session_id=scan.header.id)
    return scan, interrupted_turn_closers(scan.events)


def _derive_one(path: str, reg: EventRegistry, recover: bool, to: str | None = None) -> Any:
    if not recover:
        session = load_session(path, reg)
    else:
        from .._session import Session

        scan, closers = _recovered(path, reg)
        events = [*scan.events, *closers]
        session = Session(scan.header.id, events, scan.header, registry=reg)
    if to is None:
        return session.derive_messages()
    return _convert(session, to)


#: ``derive --to``: the provider request shapes (dsh_session_core.providers).
_TARGETS = ("openai-chat", "openai-responses", "anthropic", "pydantic-ai")


def _convert(session: Session, to: str) -> Any:
    """The session's request as ``--to`` names it: plain JSON data (pydantic-ai's
    messages as its ``ModelMessagesTypeAdapter`` dumps them)."""
    from .. import providers

    if to == "openai-chat":
        return providers.to_openai_chat(session)
    if to == "openai-responses":
        return providers.to_openai_responses(session)
    if to == "anthropic":
        return providers.to_anthropic(session)
    try:
        history = providers.to_pydantic_ai(session)
    except ImportError as exc:
        msg = str(exc)
        raise Failure(msg, EXIT_USAGE, hint="or pick another --to") from None
    import msgspec
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return msgspec.Raw(ModelMessagesTypeAdapter.dump_json(history))


def _derive(args: argparse.Namespace) -> int:
    from .._codec import encode_line
    from ..errors import DshSessionError

    reg = registry()
    if not args.jsonl:
        if len(args.files) != 1:
            msg = "derive takes one FILE"
            raise Failure(msg, EXIT_USAGE, hint="use --jsonl to derive several files at once")
        try:
            messages = _derive_one(args.files[0], reg, args.recover, args.to)
        except DshSessionError as exc:
            msg = f"{args.files[0]}: {one_line(exc)}"
            raise Failure(msg, hint=log_hint(exc, None if args.recover else _LOG_HINT)) from exc
        write(encode_line(messages) + b"\n")
        return EXIT_OK
    status = EXIT_OK
    for path in args.files:
        row: dict[str, object] = {"file": path}
        try:
            row["messages"] = _derive_one(path, reg, args.recover, args.to)
        except DshSessionError as exc:
            row["error"] = one_line(exc)
        except Failure as exc:
            row["error"] = str(exc)
            status = EXIT_REJECTED
        write(encode_line(row) + b"\n")
    return status


def _export(args: argparse.Namespace) -> int:
    """A log file (read as is: a line that does not parse is an error, nothing is
    dropped silently) or a stored session (read-only, as its backend stores it), written
    back as JSONL, or with ``--json`` as one document ``{"header": ..., "events": [...]}``
    in the wire shape."""
    from .._codec import encode_events, encode_line
    from .._logfile import dump_log, parse_log
    from ..errors import DshSessionError
    from .source import is_log_file, load_source, read_bytes, warn

    reg = registry()
    if is_log_file(args.file):
        try:
            log = parse_log(read_bytes(args.file, "exporting"), reg, path=args.file)
        except DshSessionError as exc:
            msg = f"{args.file}: {one_line(exc)}"
            raise Failure(msg, hint=log_hint(exc, _LOG_HINT)) from exc
        header, events = log.header, log.events
    else:
        args.source = args.file
        source = load_source(args, reg)
        for warning in source.warnings:
            warn(warning)
        header, events = source.header, source.events
    if not args.json:
        write(dump_log(header, events))
        return EXIT_OK
    # Log lines are JSON without raw newlines, so joining them with commas makes the
    # array: no event is decoded to builtins and encoded again.
    lines = encode_events(events)
    write(b'{"header":' + encode_line(header) + b',"events":['
          + lines[:-1].replace(b"\n", b",") + b"]}\n")
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from .._check_log import check_log
    from .._codec import encode_line
    from ..errors import DshSessionError

    reg = registry()
    failed = 0
    for path in args.files:
        try:
            problems = [str(p) for p in check_log(read_log(path, reg).events, reg,
                                                  strict=args.strict)]
        except DshSessionError as exc:
            problems = [one_line(exc)]
        failed += bool(problems)
        if args.json:
            write(encode_line({"file": path, "ok": not problems, "problems": problems}) + b"\n")
        else:
            for problem in problems:
                write(f"{path}: {problem}\n")
    if not args.json:
        checked = len(args.files)
        write(f"{checked - failed} of {checked} logs valid"
              f"{_STRICT_NOTE if args.strict else ''}\n")
    return EXIT_REJECTED if failed else EXIT_OK


def _repair(args: argparse.Namespace) -> int:
    import fcntl
    import os

    from .._codec import encode_events
    from ..errors import DshSessionError, LinkedLogError

    path = args.file
    if os.path.islink(path):
        # Never written through: a log planted as a link would have us append to
        # whatever it points at.
        target = os.readlink(path)
        refused = LinkedLogError(os.path.basename(os.path.splitext(path)[0]), path, target)
        msg = f"{path}: {one_line(refused)}"
        raise Failure(msg, hint=f"repair the file itself: dsh-session repair "
                                f"{os.path.realpath(path)}")
    try:
        scan, closers = _recovered(path, registry())
    except DshSessionError as exc:
        msg = f"{path}: {one_line(exc)}"
        hint = log_hint(exc, "corruption before the last turn/end is not a crash tail: "
                          "restore the file")
        raise Failure(msg, hint=hint) from exc
    size = os.path.getsize(path)
    torn = size - scan.committed_bytes
    if not torn and not closers:
        write(f"{path}: nothing to repair ({len(scan.events)} events, last turn closed)\n")
        return EXIT_OK
    would = "would " if args.dry_run else ""
    if torn:
        write(f"{path}: {would}cut a torn tail of {torn} byte(s) after event seq "
              f"{len(scan.events) - 1}\n")
    if closers:
        kinds = ", ".join(f"{c.type} (seq {c.seq})" for c in closers)
        write(f"{path}: {would}close the interrupted turn with {kinds}\n")
    if args.dry_run:
        return EXIT_OK
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        # The writer lock the JSONL backend takes (<log>.lock): never repair under a
        # writer.
        lock = os.open(os.path.splitext(path)[0] + ".lock", os.O_RDWR | os.O_CREAT | nofollow,
                       0o600)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                msg = f"{path}: a writer holds this session's lock"
                raise Failure(msg, hint="stop the writer, then repair") from None
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | nofollow)
            try:
                if os.fstat(fd).st_size != size:
                    msg = f"{path}: the file changed while it was read"
                    raise Failure(msg, hint="run the repair again")
                os.ftruncate(fd, scan.committed_bytes)
                os.fsync(fd)
                data = encode_events(closers)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            os.close(lock)
    except OSError as exc:
        # Whatever was written is a torn tail (or complete closers) to the next repair:
        # the log still loads.
        msg = f"{path}: the repair failed: {exc.strerror or exc}"
        raise Failure(msg, hint="fix the cause (disk space, permissions), then run the "
                                "repair again: it starts over from what is on disk") from exc
    write(f"{path}: repaired\n")
    return EXIT_OK


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    derive = sub.add_parser("derive", help=HELP["derive"])
    derive.add_argument("files", nargs="+", metavar="FILE", help="a JSONL session log")
    derive.add_argument(
        "--jsonl", action="store_true", help="one JSON line per file, errors included"
    )
    derive.add_argument(
        "--recover", action="store_true",
        help="read as a durable backend loads: drop a torn tail, close an open turn",
    )
    derive.add_argument(
        "--to", choices=_TARGETS, metavar="TARGET",
        help="print the request a provider takes instead (dsh_session_core.providers): "
             "openai-chat messages, openai-responses input items, anthropic "
             "{system, messages}, or pydantic-ai (its ModelMessagesTypeAdapter JSON; "
             "needs pydantic-ai-slim installed)",
    )
    derive.set_defaults(run=_derive)

    repair = sub.add_parser(
        "repair", help=HELP["repair"]
    )
    repair.add_argument("file", metavar="FILE", help="a JSONL session log")
    repair.add_argument("--dry-run", action="store_true", help="say what would change")
    repair.set_defaults(run=_repair)

    export = sub.add_parser(
        "export", help=HELP["export"]
    )
    export.add_argument(
        "file", metavar="SOURCE", help="a JSONL session log, or the id of a stored session"
    )
    export.add_argument(
        "--store", metavar="URL",
        help="the store holding SOURCE when it is a session id (default: "
             "$DSH_SESSION_STORE, else the user's data folder)",
    )
    export.add_argument(
        "--json", action="store_true",
        help='one JSON document {"header": ..., "events": [...]} instead of JSONL',
    )
    export.set_defaults(run=_export)

    validate = sub.add_parser(
        "validate", help=HELP["validate"]
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="JSONL session logs")
    validate.add_argument(
        "--strict", action="store_true",
        help="event types no plugin declares, and payloads that only load opaquely (an "
             "unknown key or union member), are errors too",
    )
    validate.add_argument("--json", action="store_true", help="one JSON line per file")
    validate.set_defaults(run=_validate)
