"""The demo's entry point (group ``dsh_session.plugins``, named ``demo``): hook
implementations only.

It adds ``dsh-session demo`` to the command line (:mod:`._command`); core imports
nothing of the demo. It declares no event type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_session_core import hookimpl

if TYPE_CHECKING:
    from dsh_session_core.cli import CommandLine


@hookimpl
def register_commands(cli: CommandLine) -> None:
    from . import _command

    cli.add_command("demo", _command.run, help=_command.HELP,
                    arguments=_command.arguments, description=_command.DESCRIPTION,
                    example=_command.EXAMPLE)
