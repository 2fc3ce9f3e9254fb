"""``dsh-session view``: a store's sessions in a local web page, read-only.

The server and the page are the ``dsh-session-view`` distribution's: this module only
builds the command's arguments, and imports ``dsh_session_view`` when the command runs
(without it installed, one line says what to install).
"""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import Failure

__all__ = ["add_commands", "need_view"]


def need_view(what: str) -> None:
    """Refuse ``what`` when ``dsh-session-view`` is not installed.

    :raises Failure: it is not.
    """
    import importlib.util

    if importlib.util.find_spec("dsh_session_view") is None:
        msg = f"{what} needs the dsh-session-view package"
        raise Failure(msg, hint="pip install dsh-session-view")


def _run(args: argparse.Namespace) -> int:
    need_view("dsh-session view")
    from dsh_session_view import run_view

    return run_view(args)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .source import add_source_arguments

    view = sub.add_parser(
        "view", help=HELP["view"],
        description="Serve a store's sessions as a local web page: the list (filters, "
                    "search, fork lineage) and each session's turns, items, derived "
                    "messages and charts. Read-only: no session is written, no lock is taken.",
    )
    add_source_arguments(view, recover=False,
                         optional="open on this session: a log file (.jsonl, shown alone) "
                                  "or the id of a session in the store")
    view.add_argument("--host", metavar="HOST",
                      help="the address to listen on (default 127.0.0.1: this machine only)")
    view.add_argument("--allow-remote", action="store_true",
                      help="let --host be an address other machines reach (the viewer has "
                           "no authentication: anyone who reaches it reads the sessions)")
    view.add_argument("--allowed-host", metavar="NAME", action="append", default=[],
                      help="answer requests that name this host (its Host header) too, "
                           "besides localhost, 127.0.0.1, [::1] and the --host address: "
                           "the name a proxy, a tunnel or other machines reach it by; "
                           "repeatable. Others get 421 (DNS rebinding)")
    view.add_argument("--port", metavar="N", type=int, default=0,
                      help="the port to listen on (default 0: a free one, printed)")
    view.add_argument("--no-open", action="store_true",
                      help="print the URL without opening a browser")
    view.set_defaults(run=_run)
