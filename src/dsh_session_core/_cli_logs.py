"""``dsh-session derive``, ``export`` and ``validate``: commands on log files."""

from __future__ import annotations

import argparse

from ._cli_support import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    Failure,
    load_session,
    one_line,
    read_log,
    registry,
    write,
)

__all__ = ["add_commands"]


def _derive(args: argparse.Namespace) -> int:
    from ._codec import ENCODER
    from .errors import DshSessionError

    reg = registry()
    if not args.jsonl:
        if len(args.files) != 1:
            msg = "derive takes one FILE; use --jsonl for several"
            raise Failure(msg, EXIT_USAGE)
        try:
            messages = load_session(args.files[0], reg).derive_messages()
        except DshSessionError as exc:
            msg = f"{args.files[0]}: {one_line(exc)}"
            raise Failure(msg) from exc
        write(ENCODER.encode(messages) + b"\n")
        return EXIT_OK
    status = EXIT_OK
    for path in args.files:
        row: dict[str, object] = {"file": path}
        try:
            row["messages"] = load_session(path, reg).derive_messages()
        except DshSessionError as exc:
            row["error"] = one_line(exc)
        except Failure as exc:
            row["error"] = str(exc)
            status = EXIT_REJECTED
        write(ENCODER.encode(row) + b"\n")
    return status


def _export(args: argparse.Namespace) -> int:
    from ._logfile import dump_log
    from .errors import DshSessionError

    try:
        log = read_log(args.file, registry())
    except DshSessionError as exc:
        msg = f"{args.file}: {one_line(exc)}"
        raise Failure(msg) from exc
    write(dump_log(log.header, log.events))
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from ._codec import ENCODER
    from ._validate import check_events
    from .errors import DshSessionError

    reg = registry()
    failed = 0
    for path in args.files:
        try:
            problems = [str(p) for p in check_events(read_log(path, reg).events, reg,
                                                     strict=args.strict)]
        except DshSessionError as exc:
            problems = [one_line(exc)]
        failed += bool(problems)
        if args.json:
            write(ENCODER.encode({"file": path, "ok": not problems, "problems": problems}) + b"\n")
        else:
            for problem in problems:
                write(f"{path}: {problem}\n")
    if not args.json:
        checked = len(args.files)
        write(f"{checked - failed} of {checked} logs valid"
              f"{' (strict: unknown event types are errors)' if args.strict else ''}\n")
    return EXIT_REJECTED if failed else EXIT_OK


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    derive = sub.add_parser("derive", help="print the messages derived from a log")
    derive.add_argument("files", nargs="+", metavar="FILE", help="a JSONL session log")
    derive.add_argument(
        "--jsonl", action="store_true", help="one JSON line per file, errors included"
    )
    derive.set_defaults(run=_derive)

    export = sub.add_parser("export", help="parse a log and write it back as JSONL")
    export.add_argument("file", metavar="FILE", help="a JSONL session log")
    export.set_defaults(run=_export)

    validate = sub.add_parser(
        "validate", help="check every event of logs against its registered schema"
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="JSONL session logs")
    validate.add_argument(
        "--strict", action="store_true", help="event types no plugin declares are errors too"
    )
    validate.add_argument("--json", action="store_true", help="one JSON line per file")
    validate.set_defaults(run=_validate)
