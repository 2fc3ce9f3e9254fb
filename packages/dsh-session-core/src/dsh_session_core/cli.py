"""What a command a plugin adds to ``dsh-session`` needs from the CLI.

The viewer's ``view`` and ``export --html`` and the demo's ``demo`` are such commands:
the command line their ``register_commands`` hook is given (:class:`CommandLine`), the
SOURCE arguments every command that reads a session takes (:func:`add_source_arguments`:
``SOURCE``, ``--store``, ``--key-env``, ``--file``/``--id``), how to fail, with which
exit status, the installed plugins' registry, warnings and output, a progress bar for a
long read (``progress=Progress`` of :func:`~dsh_session_core.inspect.load_source`), and
SOURCE arguments as the read model's :class:`~dsh_session_core.inspect.SourceSpec`.

A command raises :class:`Failure` to stop with one line, a hint and an exit status
(:data:`EXIT_USAGE` for a wrong command line, :data:`EXIT_REJECTED` for input read and
refused); the read model's errors become failures by :func:`failure_of`. The top level
of the command line stays core's: how commands are listed, parsed and dispatched, and
how their failures are shown. A store is named to people by :func:`printable_url`:
without the password its URL may hold.
"""

from __future__ import annotations

from ._cli.plugin_commands import CommandLine
from ._cli.source import add_source_arguments
from ._cli.source import spec_of as source_spec
from ._cli.support import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    Failure,
    failure_of,
    plugin_manager,
    registry,
    warn,
    write,
)
from ._cli.term import Progress
from ._persistence.urls import printable_url

__all__ = [
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_USAGE",
    "CommandLine",
    "Failure",
    "Progress",
    "add_source_arguments",
    "failure_of",
    "plugin_manager",
    "printable_url",
    "registry",
    "source_spec",
    "warn",
    "write",
]
