"""The ``dsh-session`` command: parsing, dispatch, and how failures are shown.

Commands live in one module per group: ``logs`` (derive, export, validate, repair),
``registry`` (plugins, events), ``sessions`` (ls, show, stats, tail, fork), ``copy``...;
:data:`.commands.COMMANDS` says which holds which, and plugins add theirs
(:mod:`.plugin_commands`: the viewer's ``view``, the demo's ``demo``). Only the module of the
command being run is imported and its parsers built (:mod:`.parser`), and each imports
what its commands need only when they run. The top-level help (no arguments, ``-h``,
``--help``) is printed by :mod:`.help` without argparse at all.

Exit status: 0 success, 1 the input was rejected (one line on stderr says why), 2 bad
usage, 3 some sessions could not be read (``search``: the others' hits are shown, each
one left out named on stderr), 130 interrupted (Ctrl-C, SIGINT: 128 + 2, as a shell
reports a command SIGINT stopped), in every command: here, whatever the command made of
the interrupt (``copy``, ``prune``, ``rekey`` and ``search`` say what they did and how to
go on, ``view`` that it stopped, then exit 130 too). Tracebacks only with ``--debug``.

How an error a command lets out is shown (its line, its hint, its status) is one table,
:func:`.support.failure_for`, applied here: a command lets the read model's errors, a
session not stored or any other error out (or raises a :class:`~.support.Failure` of its
own words), and formats none of them itself. (The SOURCE helpers of :mod:`.source` make
their Failure by the same table, for the commands that catch it to report each SOURCE
in a row of its own: ``validate``, ``derive --jsonl``.)
"""

from __future__ import annotations

import sys

from .support import EXIT_OK, EXIT_USAGE, failure_for

#: The exit status of a command interrupted by Ctrl-C (SIGINT): 128 + 2, what a shell
#: reports for a command the signal stopped (GNU tail -f, cat, sleep... say the same).
EXIT_INTERRUPTED = 130

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
_TYPE_CHECKING = False

if _TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import NoReturn


__all__ = ["main"]

#: What asks for the top-level help and nothing else: printed without argparse.
_HELP_ONLY: tuple[list[str], ...] = ([], ["-h"], ["--help"])


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv`` (:func:`.parser.build_parser`)."""
    from .parser import build_parser

    return build_parser(argv)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line and exit with its status."""
    if argv is None:
        argv = sys.argv[1:]
    if list(argv) in _HELP_ONLY:
        from .help import render_help

        try:
            sys.stdout.write(render_help())
            sys.stdout.flush()
        except BrokenPipeError:
            pass
        raise SystemExit(EXIT_USAGE if not argv else EXIT_OK)
    try:
        parser = _parser(argv)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    if args.command is None:
        parser.print_help()
        raise SystemExit(EXIT_USAGE)
    if not args.debug:
        _quiet_drivers()
    try:
        status = _run(args)
        # What stdout still holds is written here, not at the interpreter's exit: a
        # Ctrl-C while a full pipe holds it up is an interrupt like any other (130), not
        # a death by SIGINT.
        sys.stdout.flush()
    except BrokenPipeError:
        raise SystemExit(EXIT_OK) from None
    except Exception as exc:
        if args.debug:
            raise
        # The one table of how an error is shown (a command's Failure as it made it).
        failure = failure_for(exc)
        print(f"dsh-session: {failure}", file=sys.stderr)
        if failure.hint:
            print(f"hint: {failure.hint}", file=sys.stderr)
        # A command may say what an interrupt left (copy does); it still exits 130.
        raise SystemExit(EXIT_INTERRUPTED if _interrupted(exc) else failure.status) from None
    except KeyboardInterrupt:
        if args.debug:
            raise
        raise SystemExit(EXIT_INTERRUPTED) from None
    raise SystemExit(status)


def _quiet_drivers() -> None:
    """Keep what database drivers log while unwinding off the user's screen: psycopg logs
    "error ignored in rollback" when a Ctrl-C lands mid-query, and with no handler of
    the program's, logging's last resort would print it beside our one-line message
    (CI caught it). ``--debug`` leaves it shown."""
    import logging

    logging.getLogger("psycopg").addHandler(logging.NullHandler())


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a Ctrl-C was being handled (a ``Failure`` a
    command made of its ``KeyboardInterrupt``, even ``from None``, or an error its
    clean-up met): its context chain holds the ``KeyboardInterrupt``."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return True
        seen.add(id(at))
        at = at.__context__ or at.__cause__
    return False


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command, printing the library's warnings (a log a listing skipped)
    as the CLI's own ``dsh-session: warning: ...`` lines, without the source line Python
    would show; the process's warning settings are restored afterwards."""
    import contextlib
    import warnings

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        print(f"dsh-session: warning: {message}", file=sys.stderr)

    key_env = getattr(args, "key_env", None)
    keys: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if key_env is not None:  # else the read model's default (DSH_SESSION_KEYS)
        from .._inspect.stores import key_variable

        keys = key_variable(key_env)
    with warnings.catch_warnings(), keys:
        warnings.showwarning = show
        warnings.simplefilter("always", UserWarning)
        status: int = args.run(args)
    return status
