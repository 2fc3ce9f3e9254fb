"""What a command a plugin adds to ``dsh-session`` needs from the CLI.

The viewer's ``view`` and ``export --html`` are such commands: how to fail, with which
exit status, the installed plugins' registry, warnings and output, a progress bar for a
long read (``progress=Progress`` of :func:`~dsh_session_core.inspect.load_source`), and
SOURCE arguments as the read model's :class:`~dsh_session_core.inspect.SourceSpec`.

A command raises :class:`Failure` to stop with one line, a hint and an exit status
(:data:`EXIT_USAGE` for a wrong command line, :data:`EXIT_REJECTED` for input read and
refused); the read model's errors become failures by :func:`failure_of`. The command
line itself stays core's: this module parses nothing.
"""

from __future__ import annotations

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

__all__ = [
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_USAGE",
    "Failure",
    "Progress",
    "failure_of",
    "plugin_manager",
    "registry",
    "source_spec",
    "warn",
    "write",
]
