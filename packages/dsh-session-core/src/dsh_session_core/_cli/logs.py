"""``dsh-session derive``, ``export``, ``validate`` and ``repair``: commands on logs.

Commands on logs, each a log file or a stored session (the SOURCE rule of
:mod:`.source`)."""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    Failure,
    load_session,
    log_problem,
    one_line,
    read_file,
    read_log,
    registry,
    unreadable_log,
    write,
)

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from .._logformat.logfile import ScanResult
    from .._model.session import Session
    from .._schema.registry import EventRegistry
    from ..events import Event

# What the commands run is imported in the functions that run it: `dsh-session export --help`
# imports this module to build the parser, with argparse alone (the store, read-model and
# terminal modules would cost it some 100-250 ms).

__all__ = ["add_commands", "add_export_formats"]

#: What to try when a log does not read as is.
_LOG_HINT = (
    "`dsh-session validate FILE` names every bad event; a crashed log reads with --recover "
    "and is fixed by `dsh-session repair FILE`"
)



_STRICT_NOTE = (" (strict: unknown event types, opaque payloads and unanswered tool calls "
                "are errors)")


def _recovered(path: str, reg: EventRegistry) -> tuple[ScanResult, list[Event]]:
    """A log file read by the JSONL backend's load rules: its scan (torn tail dropped)
    and the closers that close an interrupted turn (nothing is written)."""
    from .._logformat.logfile import scan_log
    from .._model.repair import interrupted_turn_closers
    from .._persistence.store.coordinator import PersistenceError
    from .._schema.header import SESSION_FORMAT_VERSION

    scan = scan_log(read_file(path), reg, path=path)
    if scan.header.version != SESSION_FORMAT_VERSION:
        msg = (
            f"unsupported session format version {scan.header.version} for "
            f'"{scan.header.id}" (only v{SESSION_FORMAT_VERSION} is supported)'
        )
        raise PersistenceError(msg, session_id=scan.header.id)
    return scan, interrupted_turn_closers(scan.events)


def _derive_one(args: argparse.Namespace, path: str, reg: EventRegistry) -> Any:
    from .._model.session import Session
    from .source import load_source, resolve, warn

    recover, to = args.recover, args.to
    if resolve(path, args) == "id":
        source = load_source(args, reg, path)
        for warning in source.warnings:
            warn(warning)
        events = [*source.events, *source.closers] if recover else source.events
        session = Session(source.header.id, events, source.header, registry=reg)
    elif not recover:
        session = load_session(path, reg)
    else:
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
    from .._schema.codec import encode_line
    from ..errors import DshSessionError
    from .source import resolve

    reg = registry()
    if not args.jsonl:
        if len(args.sources) != 1:
            msg = "derive takes one SOURCE"
            raise Failure(msg, EXIT_USAGE, hint="use --jsonl to derive several at once")
        try:
            messages = _derive_one(args, args.sources[0], reg)
        except DshSessionError as exc:
            hint = None if args.recover else _LOG_HINT
            raise unreadable_log(args.sources[0], exc, hint) from exc
        write(encode_line(messages) + b"\n")
        return EXIT_OK
    status = EXIT_OK
    for path in args.sources:
        row: dict[str, object] = {"file": path}
        try:
            if resolve(path, args) == "id":
                row = {"session": path}
            row["messages"] = _derive_one(args, path, reg)
        except DshSessionError as exc:
            row["error"] = log_problem(path, exc) if "file" in row else one_line(exc)
        except Failure as exc:
            row["error"] = str(exc)
            status = EXIT_REJECTED
        write(encode_line(row) + b"\n")
    return status


def _export(args: argparse.Namespace) -> int:
    """A log file (read as is: a line that does not parse is an error, nothing is
    dropped silently) or a stored session (read-only, as its backend stores it), written
    back as JSONL, or with ``--json`` as one document ``{"header": ..., "events": [...]}``
    in the wire shape; or in a format a plugin adds (:func:`add_export_formats`)."""
    from .._logformat.logfile import dump_log, parse_log
    from .._schema.codec import encode_events, encode_line
    from ..errors import DshSessionError
    from .source import load_source, read_bytes, resolve, warn

    formats: list[str] = getattr(args, "formats", None) or []
    if formats or args.output is not None:
        return _export_plugin(args, formats)
    reg = registry()
    if resolve(args.source, args) == "file":
        try:
            log = parse_log(read_bytes(args.source, "exporting"), reg, path=args.source)
        except DshSessionError as exc:
            raise unreadable_log(args.source, exc, _LOG_HINT) from exc
        header, events = log.header, log.events
    else:
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


def _format_names() -> list[str]:
    """The formats plugins add to ``export`` here, and those the project's own plugins
    add when installed, by name."""
    from .commands import KNOWN_PLUGINS
    from .plugin_commands import plugin_additions

    known = {name for _, _, formats in KNOWN_PLUGINS.values() for name in formats}
    return sorted(known | set(plugin_additions().formats))


def _export_plugin(args: argparse.Namespace, formats: list[str]) -> int:
    """``export --FORMAT``: a format a plugin adds (the viewer's ``--html``: the
    session's page as one HTML file), run by that plugin; one the project's own
    distributions add, not installed here, says what to install."""
    from .plugin_commands import plugin_additions, refusal

    if not formats:
        names = " or ".join(f"--{name}" for name in _format_names()) or "a plugin's format"
        msg = f"-o/--output goes with {names}"
        raise Failure(msg, EXIT_USAGE, hint="JSONL and --json go to stdout: redirect it")
    named = list(dict.fromkeys(formats))
    if len(named) > 1 or args.json:
        other = "--json" if len(named) == 1 else f"--{named[1]}"
        msg = f"--{named[0]} and {other} are two formats: pick one"
        raise Failure(msg, EXIT_USAGE)
    added = plugin_additions().formats.get(named[0])
    run = added.run if added is not None else refusal(named[0], export_format=True)
    assert run is not None  # only a format added or known has its option
    return run(args)


def add_export_formats(export: argparse.ArgumentParser) -> None:
    """The formats the installed plugins add to ``export`` (their ``register_commands``),
    each an option ``--NAME``; a format of the project's own distributions that is not
    installed is an option too, whose run says what to install."""
    from .commands import KNOWN_PLUGINS
    from .plugin_commands import plugin_additions

    added = plugin_additions().formats
    owners = {name: distribution for distribution, _, formats in KNOWN_PLUGINS.values()
              for name in formats}
    for name in _format_names():
        text = (added[name].help if name in added
                else f"(needs {owners[name]}, which is not installed)")
        export.add_argument(f"--{name}", dest="formats", action="append_const", const=name,
                            help=text)


def _validate(args: argparse.Namespace) -> int:
    from .._logformat.check import check_log
    from .._schema.codec import encode_line
    from ..errors import DshSessionError
    from .source import load_source, resolve, warn

    reg = registry()
    failed = 0
    for path in args.sources:
        key = "file"
        try:
            if resolve(path, args) == "file":
                events = read_log(path, reg).events
            else:
                key = "session"
                source = load_source(args, reg, path)
                for warning in source.warnings:
                    warn(warning)
                events = source.events
            problems = [str(p) for p in check_log(events, reg, strict=args.strict)]
        except DshSessionError as exc:
            problems = [log_problem(path, exc) if key == "file" else one_line(exc)]
        except Failure as exc:
            if len(args.sources) == 1:
                raise
            problems = [str(exc)]
        failed += bool(problems)
        if args.json:
            write(encode_line({key: path, "ok": not problems, "problems": problems}) + b"\n")
        else:
            for problem in problems:
                write(f"{path}: {problem}\n")
    if not args.json:
        checked = len(args.sources)
        write(f"{checked - failed} of {checked} logs valid"
              f"{_STRICT_NOTE if args.strict else ''}\n")
    return EXIT_REJECTED if failed else EXIT_OK


def _repair(args: argparse.Namespace) -> int:
    from .source import resolve

    status = EXIT_OK
    for source in args.sources:
        if resolve(source, args) == "id":
            status = max(status, _repair_stored(args, source))
        else:
            status = max(status, _repair_file(args, source))
    return status


def _repair_stored(args: argparse.Namespace, session_id: str) -> int:
    """A stored session repaired as opening it repairs it (any backend): the torn tail
    cut and the interrupted turn closed, under the session's writer lock."""
    from .._model.repair import interrupted_turn_closers
    from .._persistence.store.durable import DurableStore
    from ..errors import DshSessionError, SessionLockedError
    from .source import check_session_id, not_found, open_backend, store_url

    url = store_url(args)
    label = f'session "{session_id}" in {url}'
    with DurableStore(open_backend(url)) as store:
        check_session_id(store.backend, session_id)
        try:
            stored = store.backend.load_stored(session_id, store.registry)
        except DshSessionError as exc:
            msg = f"{label}: {one_line(exc)}"
            raise Failure(msg, hint="corruption before the last turn/end is not a crash "
                                    "tail: restore the session from a copy") from exc
        if stored is None:
            raise not_found(session_id, url)
        closers = interrupted_turn_closers(stored.events)
        tail = "a torn tail" if stored.torn is not None else None
        if not _say_repair(label, tail, closers, len(stored.events), args.dry_run):
            return EXIT_OK
        try:
            store.release(store.open(session_id))
        except SessionLockedError:
            msg = f"{label}: a writer holds this session's lock"
            raise Failure(msg, hint="stop the writer, then repair") from None
        except (DshSessionError, OSError) as exc:
            msg = f"{label}: the repair failed: {one_line(exc)}"
            raise Failure(msg, hint="fix the cause, then run the repair again") from exc
    write(f"{label}: repaired\n")
    return EXIT_OK


def _say_repair(label: str, tail: str | None, closers: list[Event], events: int,
                dry_run: bool) -> bool:
    """Print what a repair of ``label`` does (or, dry, would do): cut ``tail`` (after the
    last of its ``events``), append the ``closers``. Whether there is anything to write."""
    if tail is None and not closers:
        write(f"{label}: nothing to repair ({events} events, last turn closed)\n")
        return False
    would = "would " if dry_run else ""
    if tail is not None:
        write(f"{label}: {would}cut {tail} after event seq {events - 1}\n")
    if closers:
        kinds = ", ".join(f"{c.type} (seq {c.seq})" for c in closers)
        write(f"{label}: {would}close the interrupted turn with {kinds}\n")
    return not dry_run


def _compact(path: str) -> bool:
    """Whether a file is a compact log (it starts with a zstd frame)."""
    from .support import ZSTD_MAGIC

    try:
        with open(path, "rb") as f:
            return f.read(len(ZSTD_MAGIC)) == ZSTD_MAGIC
    except OSError:
        return False  # the repair's own read says why


def _repair_file(args: argparse.Namespace, path: str) -> int:
    import fcntl
    import os

    from .._schema.codec import encode_events
    from ..errors import DshSessionError, LinkedLogError

    if os.path.islink(path):
        # Never written through: a log planted as a link would have us append to
        # whatever it points at.
        target = os.readlink(path)
        refused = LinkedLogError(os.path.basename(os.path.splitext(path)[0]), path, target)
        msg = f"{path}: {one_line(refused)}"
        raise Failure(msg, hint=f"repair the file itself: dsh-session repair "
                                f"{os.path.realpath(path)}")
    if _compact(path):
        msg = f"{path} is a compact log (zstd frames): repair writes it through its store"
        raise Failure(msg, hint="dsh-session repair ID --store jsonl+zstd:///STORE (the "
                                "folder holding its bucket)")
    try:
        scan, closers = _recovered(path, registry())
    except DshSessionError as exc:
        raise unreadable_log(path, exc, "corruption before the last turn/end is not a crash "
                                        "tail: restore the file") from exc
    size = os.path.getsize(path)
    torn = size - scan.committed_bytes
    tail = f"a torn tail of {torn} byte(s)" if torn else None
    if not _say_repair(path, tail, closers, len(scan.events), args.dry_run):
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
    from .source import add_source_arguments

    derive = sub.add_parser("derive", help=HELP["derive"])
    add_source_arguments(derive, many=True, recover=False)
    derive.add_argument(
        "--jsonl", action="store_true", help="one JSON line per SOURCE, errors included"
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
    add_source_arguments(repair, many=True, recover=False)
    repair.add_argument("--dry-run", action="store_true", help="say what would change")
    repair.set_defaults(run=_repair)

    export = sub.add_parser(
        "export", help=HELP["export"]
    )
    add_source_arguments(export, recover=False)
    export.add_argument(
        "--json", action="store_true",
        help='one JSON document {"header": ..., "events": [...]} instead of JSONL',
    )
    export.add_argument("-o", "--output", metavar="FILE",
                        help="with a format a plugin adds (--html): write to FILE instead "
                             "of stdout")
    export.set_defaults(run=_export)

    validate = sub.add_parser(
        "validate", help=HELP["validate"]
    )
    add_source_arguments(validate, many=True, recover=False)
    validate.add_argument(
        "--strict", action="store_true",
        help="event types no plugin declares, payloads that only load opaquely (an "
             "unknown key or union member), and tool calls no tool/result answers, are "
             "errors too",
    )
    validate.add_argument("--json", action="store_true", help="one JSON line per file")
    validate.set_defaults(run=_validate)
