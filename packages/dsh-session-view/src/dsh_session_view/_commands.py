"""What the viewer adds to the ``dsh-session`` command line (its plugin's
``register_commands``, :mod:`.plugin`): ``view`` and the ``export`` format ``--html``, with
their help and arguments.

Kept light: the hook reads this module whenever ``dsh-session`` lists or builds its
commands, so it imports nothing at all; the arguments are added only when ``view``'s
parser is built, and the server, the page and the export load only when a command runs
(:mod:`._cli`).
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    import argparse

__all__ = [
    "HTML_HELP",
    "VIEW_DESCRIPTION",
    "VIEW_EXAMPLE",
    "VIEW_HELP",
    "export_html",
    "view",
    "view_arguments",
]

VIEW_HELP = "browse a store's sessions in a local web page (read-only)"
VIEW_DESCRIPTION = (
    "Serve a store's sessions as a local web page: the list (filters, search, fork "
    "lineage) and each session's turns, items, derived messages and charts. Read-only: no "
    "session is written, no lock is taken."
)
VIEW_EXAMPLE = "dsh-session view --store sqlite:///agent.db"
HTML_HELP = "the session's page as one self-contained HTML file (dsh-session-view)"


def view_arguments(parser: argparse.ArgumentParser) -> None:
    """``view``'s arguments: SOURCE as every command reading sessions takes it, and where
    to listen."""
    from dsh_session_core.cli import add_source_arguments

    add_source_arguments(parser, recover=False, prefixes=True,
                         optional="open on this session: a log file (.jsonl, shown alone) "
                                  "or a session in the store: its id, its name (an ADK "
                                  "session's app/user/session), or an unambiguous prefix "
                                  "of its id")
    parser.add_argument("--host", metavar="HOST",
                        help="the address to listen on (default 127.0.0.1: this machine "
                             "only)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="let --host be an address other machines reach (the viewer "
                             "has no authentication: anyone who reaches it reads the "
                             "sessions)")
    parser.add_argument("--allowed-host", metavar="NAME", action="append", default=[],
                        help="answer requests that name this host (its Host header) too, "
                             "besides localhost, 127.0.0.1, [::1] and the --host address: "
                             "the name a proxy, a tunnel or other machines reach it by; "
                             "repeatable. Others get 421 (DNS rebinding)")
    parser.add_argument("--port", metavar="N", type=int, default=0,
                        help="the port to listen on (default 0: a free one, printed)")
    parser.add_argument("--no-open", action="store_true",
                        help="print the URL without opening a browser")


def view(args: argparse.Namespace) -> int:
    """``dsh-session view [SOURCE]`` (:func:`._cli.run_view`)."""
    from ._cli import run_view

    return run_view(args)


def export_html(args: argparse.Namespace) -> int:
    """``dsh-session export --html SOURCE [-o FILE]`` (:func:`._cli.run_export_html`)."""
    from ._cli import run_export_html

    return run_export_html(args)
