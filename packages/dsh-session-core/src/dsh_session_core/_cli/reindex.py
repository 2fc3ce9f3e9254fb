"""``dsh-session reindex``: rebuild a store's projection rows from its logs.

The rows a store keeps beside its logs for the installed plugins' projections
(docs/projections.md) are derived: this drops them and folds them anew from each log,
under its writer lock (a session a live writer holds is left as it is, and said).
"""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import EXIT_REJECTED, EXIT_USAGE, Failure

# What the command runs is imported in the function that runs it: `--help` builds the
# parser with argparse alone.

__all__ = ["add_commands"]

_DESCRIPTION = """\
Rebuild the projection rows of a store's sessions (the keyed rows the installed
plugins' projections keep beside each log, so that their reads need not fold it) from
the logs themselves. A store keeps them current at every write and rebuilds what it
finds stale on its own: run this after upgrading a plugin whose fold changed without a
new version, or to build the rows of a store written by an older release at once rather
than at each session's next write. The logs are not changed. Each session is rebuilt
under its writer lock; one a live writer holds is left as it is (run again later)."""


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .source import KEY_ENV_HELP

    reindex = sub.add_parser("reindex", help=HELP["reindex"], description=_DESCRIPTION)
    reindex.add_argument("ids", nargs="*", metavar="ID",
                         help="the sessions to rebuild (none: --all)")
    reindex.add_argument("--all", action="store_true", help="every session of the store")
    reindex.add_argument("--store", metavar="URL",
                         help="the store (default: $DSH_SESSION_STORE, else the user's "
                              "data folder)")
    reindex.add_argument("--key-env", metavar="NAME", help=KEY_ENV_HELP)
    reindex.add_argument("--json", action="store_true", help="print what was done as JSON")
    reindex.set_defaults(run=_reindex)


def _reindex(args: argparse.Namespace) -> int:
    from .._persistence.store.durable import DurableStore
    from .source import open_backend, out_json, out_text, store_url

    if bool(args.ids) == bool(args.all):
        msg = "name the sessions to rebuild, or pass --all (not both)"
        raise Failure(msg, EXIT_USAGE)
    backend = open_backend(store_url(args))
    with DurableStore(backend) as store:
        if store.capabilities.projecting is None:
            msg = (f"the {backend.name} backend keeps no projection rows: its reads fold "
                   f"the logs, there is nothing to rebuild")
            raise Failure(msg, EXIT_USAGE)
        done = store.reindex(args.ids or None)
    locked = [sid for sid, names in done.items() if names is None]
    if args.json:
        out_json({"rebuilt": [{"id": sid, "projections": list(names)}
                              for sid, names in done.items() if names is not None],
                  "locked": locked})
    else:
        for sid, names in done.items():
            if names is None:
                out_text(f"{sid}: left as it is: a writer holds it (run again later)\n")
            else:
                out_text(f"{sid}: {', '.join(names) or 'no projection'} rebuilt\n")
    return EXIT_REJECTED if locked else 0
