"""The viewer's entry point (group ``dsh_session.plugins``, named ``view``): hook
implementations only.

It adds ``dsh-session view`` and ``dsh-session export --html`` to the command line
(:mod:`._commands`); core imports nothing of the viewer. It declares no event type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_session_core import hookimpl

if TYPE_CHECKING:
    from dsh_session_core.cli import CommandLine


@hookimpl
def register_commands(cli: CommandLine) -> None:
    from . import _commands

    cli.add_command("view", _commands.view, help=_commands.VIEW_HELP,
                    arguments=_commands.view_arguments,
                    description=_commands.VIEW_DESCRIPTION, example=_commands.VIEW_EXAMPLE)
    cli.add_export_format("html", _commands.export_html, help=_commands.HTML_HELP)
