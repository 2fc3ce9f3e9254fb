"""The ``dsh-session`` command: parsing, dispatch, and how failures are shown.

Commands live in ``logs`` (derive, export, validate) and ``registry``
(plugins, events). Only what a command needs is imported, so ``--help`` stays fast.

Exit status: 0 success, 1 the input was rejected (one line on stderr says why), 2 bad
usage. Tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..errors import DshSessionError
from . import copy, demo, logs, registry, sessions
from .support import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Failure, one_line

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NoReturn


__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-session",
        description="Inspect and work with dsh-session event logs.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo.add_commands(sub)
    logs.add_commands(sub)
    registry.add_commands(sub)
    sessions.add_commands(sub)
    copy.add_commands(sub)
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
    except Failure as exc:
        if args.debug:
            raise
        print(f"dsh-session: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        raise SystemExit(exc.status) from None
    except DshSessionError as exc:  # e.g. two installed plugins clash
        if args.debug:
            raise
        print(f"dsh-session: {one_line(exc)}", file=sys.stderr)
        print("hint: run again with --debug to see where it came from", file=sys.stderr)
        raise SystemExit(EXIT_REJECTED) from None
    except BrokenPipeError:
        raise SystemExit(EXIT_OK) from None
    raise SystemExit(status)
