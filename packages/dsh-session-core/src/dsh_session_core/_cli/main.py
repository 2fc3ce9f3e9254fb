"""The ``dsh-session`` command: parsing, dispatch, and how failures are shown.

Commands live in one module per group: ``demo``, ``logs`` (derive, export, validate,
repair), ``registry`` (plugins, events), ``sessions`` (ls, show, stats, tail, fork) and
``copy``; :data:`.commands.COMMANDS` says which holds which. Only the module of the
command being run is imported and its parsers built, and each imports what its commands
need only when they run: ``--help`` loads no command module, msgspec, pluggy or backend.

Exit status: 0 success, 1 the input was rejected (one line on stderr says why), 2 bad
usage. Tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .commands import COMMANDS
from .support import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Failure, one_line

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
_TYPE_CHECKING = False

if _TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn


__all__ = ["main"]


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it ($COLUMNS, else the
    terminal, else 80), without importing shutil (and its compression modules): this
    runs on every ``--help``."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, measuring the terminal itself (see :func:`_columns`)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """The commands' parsers: :class:`_Formatter` unless a command asks for another."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands action, which can also list a command without building its parser
    (each parser costs argparse's gettext look-ups: ``--help`` would pay for all)."""

    def add_listing(self, name: str, text: str) -> None:
        """List ``name`` with its help; it stays an unknown choice if given."""
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), text))
        self.choices = {**(self.choices or {}), name: None}  # a copy: nothing to parse


class _Version(argparse.Action):
    """``--version``: core's version, then each installed plugin's, found as ``plugins``
    finds them (loading them only now)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str) -> None:
        super().__init__(option_strings, dest, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from .registry import version_text

        try:
            text = version_text()
        except Exception as exc:  # a broken plugin must not hide core's own version
            from .registry import own_version

            text = (f"dsh-session-core {own_version()}\n"
                    f"plugins: cannot be listed ({one_line(exc)})\n")
        sys.stdout.write(text)
        parser.exit(EXIT_OK)


def _command(argv: Sequence[str]) -> str | None:
    """The command an argument list runs: its first argument that is not an option (the
    top-level options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: with every command's parser when ``argv`` is ``None``;
    else with only the parsers of the module of the command ``argv`` runs, or, when it
    names none, with a help-only entry per command (from :data:`.commands.COMMANDS`, so
    that ``--help`` imports and builds no command)."""
    parser = _Parser(prog="dsh-session",
                     description="Inspect and work with dsh-session event logs.")
    parser.add_argument("--version", action=_Version,
                        help="show the version of dsh-session-core and of each plugin")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    assert isinstance(sub, _Commands)
    if argv is None:
        modules = list(dict.fromkeys(module for module, _ in COMMANDS.values()))
    else:
        command = _command(argv)
        modules = [COMMANDS[command][0]] if command in COMMANDS else []
    if not modules:
        for name, (_, text) in COMMANDS.items():
            sub.add_listing(name, text)
    for module in modules:
        importlib.import_module(f".{module}", __package__).add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line and exit with its status."""
    if argv is None:
        argv = sys.argv[1:]
    parser = _parser(argv)
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
    except BrokenPipeError:
        raise SystemExit(EXIT_OK) from None
    except Exception as exc:
        # Imported here, not at the top: `--help` does not pay for the error classes.
        from ..errors import DshSessionError

        if args.debug or not isinstance(exc, DshSessionError):  # e.g. two plugins clash
            raise
        print(f"dsh-session: {one_line(exc)}", file=sys.stderr)
        print("hint: run again with --debug to see where it came from", file=sys.stderr)
        raise SystemExit(EXIT_REJECTED) from None
    raise SystemExit(status)
