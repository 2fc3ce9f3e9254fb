"""The argparse parser of ``dsh-session``.

The top level from :mod:`.help`'s table, and the parsers of the command being run.

Only the module of the command being run is imported and its parsers built
(:data:`.commands.COMMANDS` says which module holds which command); with no command,
each command is listed without building its parser, since every parser costs argparse's
gettext look-ups. A command core does not have is asked of the installed plugins
(their ``register_commands``, :mod:`.plugin_commands`), and only its parser is built;
``export`` gets the formats they add.
"""

from __future__ import annotations

import argparse
import sys

from . import help as top
from .commands import COMMANDS, EXAMPLES
from .support import EXIT_OK, one_line

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
_TYPE_CHECKING = False

if _TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .plugin_commands import PluginCommand, Run

__all__ = ["build_parser", "command_of"]


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, measuring the terminal as :func:`.help.columns` does."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         top.columns() - 2 if width is None else width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        # An example is a command line: shown as written, never re-wrapped.
        if text.startswith("example:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        import textwrap  # what argparse's own formatter does with any other text

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent,
                             subsequent_indent=indent)


class _Parser(argparse.ArgumentParser):
    """The commands' parsers: :class:`_Formatter` unless a command asks for another."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        command = str(kwargs.get("prog") or "").rsplit(" ", 1)[-1]
        if command in EXAMPLES:
            kwargs.setdefault("epilog", f"example:\n  {EXAMPLES[command]}")
        super().__init__(*args, **kwargs)


class _TopParser(_Parser):
    """The top level, whose help and usage are :mod:`.help`'s, so that they are the same
    whether argparse prints them or ``main`` does without it."""

    def format_help(self) -> str:
        return top.render_help()

    def format_usage(self) -> str:
        return top.usage()


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands action, which can also list a command without building its
    parser."""

    def add_listing(self, name: str, text: str) -> None:
        """List ``name`` with its help; it stays an unknown choice if given."""
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), text))
        self.choices = {**(self.choices or {}), name: None}  # a copy: nothing to parse

    def drop(self, name: str) -> None:
        """Take back the command ``name`` (its parser and its help entry)."""
        self._name_parser_map.pop(name, None)
        self._choices_actions[:] = [a for a in self._choices_actions if a.dest != name]


class _Version(argparse.Action):
    """``--version``: core's version, then each installed plugin's, found as ``plugins``
    finds them (loading them only now), then every installed distribution of
    dsh-session's (its metadata only)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str) -> None:
        super().__init__(option_strings, dest, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from .registry import version_text

        try:
            text = version_text()
        except Exception as exc:  # a broken plugin must not hide core's own version
            from .registry import _distribution_lines, own_version

            text = "".join(line + "\n" for line in [
                f"dsh-session-core {own_version()}",
                f"plugins: cannot be listed ({one_line(exc)})", *_distribution_lines()])
        sys.stdout.write(text)
        parser.exit(EXIT_OK)


#: What each top-level option does (its help and flags are :data:`.help.OPTIONS`').
_ACTIONS: dict[str, dict[str, Any]] = {
    "--help": {"action": "help"},
    "--version": {"action": _Version},
    "--debug": {"action": "store_true"},
}


def command_of(argv: Sequence[str]) -> str | None:
    """The command an argument list runs: its first argument that is not an option (the
    top-level options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _add_plugin_command(sub: _Commands, command: PluginCommand) -> None:
    """A plugin's command, built as core builds its own; one whose arguments cannot be
    added runs as the error that stopped them (one line, or the traceback with
    ``--debug``), as any failure of a command does."""
    epilog = f"example:\n  {command.example}" if command.example else None
    parser = sub.add_parser(command.name, help=command.help,
                            description=command.description, epilog=epilog)
    parser.set_defaults(run=command.run)
    if command.arguments is not None:
        try:
            command.arguments(parser)
        except Exception as exc:
            sub.drop(command.name)
            _add_unavailable(sub, command.name, command.help, _raising(exc))


def _raising(exc: Exception) -> Run:
    def run(args: argparse.Namespace) -> int:
        raise exc

    return run


def _add_unavailable(sub: _Commands, name: str, text: str, run: Run) -> None:
    """A command that cannot run here (:func:`.plugin_commands.refusal`): its parser takes
    any arguments (no prefix character is an option's), and running it says why."""
    parser = sub.add_parser(name, help=text, add_help=False, prefix_chars="\0")
    parser.add_argument("arguments", nargs="*")
    parser.set_defaults(run=run)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: with every command's parser when ``argv`` is ``None``;
    else with only the parsers of the module of the command ``argv`` runs (core's, or
    the plugin's command it names), or, when it names none, with a help-only entry per
    command."""
    from importlib import import_module

    parser = _TopParser(prog=top.PROG, description=top.DESCRIPTION, add_help=False)
    for flags, text in top.OPTIONS:
        parser.add_argument(*flags, help=text, **_ACTIONS[flags[-1]])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands,
                                parser_class=_Parser)
    assert isinstance(sub, _Commands)
    command = None if argv is None else command_of(argv)
    plugin: list[PluginCommand] = []
    refused: Run | None = None
    if argv is None:
        modules = list(dict.fromkeys(module for module, _ in COMMANDS.values()))
    else:
        modules = [COMMANDS[command][0]] if command in COMMANDS else []
    if argv is None or (command is not None and command not in COMMANDS):
        from .plugin_commands import plugin_additions, refusal

        added = plugin_additions().commands
        plugin = [added[name] for name in sorted(added) if argv is None or name == command]
        if command is not None and not plugin:
            refused = refusal(command)
    for module in modules:
        import_module(f".{module}", __package__).add_commands(sub)
    if argv is None or command == "export":
        import_module(".logs", __package__).add_export_formats(sub.choices["export"])
    for each in plugin:
        _add_plugin_command(sub, each)
    if refused is not None and command is not None:
        _add_unavailable(sub, command, "", refused)
    elif not modules and not plugin:
        for name, text in top.command_rows():
            sub.add_listing(name, text)
    return parser
