"""The ``dsh-session`` command.

Commands:

- ``derive FILE`` prints the messages derived from a JSONL log, as one JSON array in the
  reference's shape; ``--jsonl FILE...`` prints one ``{"file", "messages"|"error"}`` line
  per file instead and exits 0 when every file could be read.
- ``export FILE`` parses a log into typed events and writes it back as JSONL.

Exit status: 0 success, 1 the log was rejected (one line on stderr says why), 2 bad
usage. Tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from ._registry import EventRegistry
    from ._session import Session

__all__ = ["main"]

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2


class _Failure(Exception):
    """A user-facing failure: one line, and the exit status to leave with."""

    def __init__(self, message: str, status: int = EXIT_REJECTED) -> None:
        super().__init__(message)
        self.status = status


def _registry() -> EventRegistry:
    from ._plugins import PluginHooks, create_plugin_manager

    return PluginHooks(create_plugin_manager()).build_registry()


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise _Failure(msg) from exc


def _load_session(path: str, registry: EventRegistry) -> Session:
    from ._logfile import open_session, parse_log

    return open_session(parse_log(_read(path), registry, path=path), registry)


def _one_line(exc: BaseException) -> str:
    """An error as one line: its class, its message, and the event seq it is about."""
    text = " ".join(str(exc).split())
    seq = getattr(exc, "seq", None)
    if isinstance(seq, int) and seq >= 0:
        text += f" (at event seq {seq})"
    return f"{type(exc).__name__}: {text}"


def _cmd_derive(args: argparse.Namespace) -> int:
    from ._codec import ENCODER
    from .errors import DshSessionError

    registry = _registry()
    out = sys.stdout.buffer
    if not args.jsonl:
        if len(args.files) != 1:
            msg = "derive takes one FILE; use --jsonl for several"
            raise _Failure(msg, EXIT_USAGE)
        try:
            messages = _load_session(args.files[0], registry).derive_messages()
        except DshSessionError as exc:
            msg = f"{args.files[0]}: {_one_line(exc)}"
            raise _Failure(msg) from exc
        out.write(ENCODER.encode(messages) + b"\n")
        return EXIT_OK
    status = EXIT_OK
    for path in args.files:
        row: dict[str, object] = {"file": path}
        try:
            row["messages"] = _load_session(path, registry).derive_messages()
        except DshSessionError as exc:
            row["error"] = _one_line(exc)
        except _Failure as exc:
            row["error"] = str(exc)
            status = EXIT_REJECTED
        out.write(ENCODER.encode(row) + b"\n")
    return status


def _cmd_export(args: argparse.Namespace) -> int:
    from ._logfile import dump_log, parse_log
    from .errors import DshSessionError

    registry = _registry()
    try:
        log = parse_log(_read(args.file), registry, path=args.file)
    except DshSessionError as exc:
        msg = f"{args.file}: {_one_line(exc)}"
        raise _Failure(msg) from exc
    sys.stdout.buffer.write(dump_log(log.header, log.events))
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-session",
        description="Inspect and work with dsh-session event logs.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    derive = sub.add_parser("derive", help="print the messages derived from a log")
    derive.add_argument("files", nargs="+", metavar="FILE", help="a JSONL session log")
    derive.add_argument(
        "--jsonl", action="store_true", help="one JSON line per file, errors included"
    )
    derive.set_defaults(run=_cmd_derive)

    export = sub.add_parser("export", help="parse a log and write it back as JSONL")
    export.add_argument("file", metavar="FILE", help="a JSONL session log")
    export.set_defaults(run=_cmd_export)
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line and exit with its status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        raise SystemExit(EXIT_USAGE)
    try:
        status = args.run(args)
    except _Failure as exc:
        if args.debug:
            raise
        print(f"dsh-session: {exc}", file=sys.stderr)
        raise SystemExit(exc.status) from None
    except BrokenPipeError:
        raise SystemExit(EXIT_OK) from None
    raise SystemExit(status)
