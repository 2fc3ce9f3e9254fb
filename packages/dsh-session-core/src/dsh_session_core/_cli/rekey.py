"""``dsh-session rekey``: reseal an encrypted store's sessions under its current key.

Reseal an encrypted store's sessions under its current key (the first of the keyring
``--key-env`` or ``DSH_SESSION_KEYS`` holds), each one atomically under its writer lock
(:mod:`.encryption.rekey`; docs/encryption.md).

Ctrl-C prints what was done (the sessions rekeyed, and those that failed, as a whole run
prints them), then says how many of how many and how to go on (exit 130)."""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import EXIT_REJECTED, EXIT_USAGE, Failure

# What the commands run is imported in the functions that run it: `dsh-session rekey --help`
# imports this module to build the parser, with argparse alone (the store, read-model and
# terminal modules would cost it some 100-250 ms).

__all__ = ["add_commands"]

_DESCRIPTION = """\
Reseal sessions of an encrypted store under its current key: each record is opened
with the key it names (every old key must still be in the keyring) and sealed again
under the first key, its seq, type and time kept. A plaintext session (which a store
opened with keys refuses to read) is sealed in place, for the first time. Each session
is rewritten at once, under its writer lock (a session a live writer holds is refused
and left as it is): a crash leaves its old records or its new ones. Once every session
is rekeyed, the old keys can be dropped."""


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .source import KEY_ENV_HELP

    # Only argparse here: `dsh-session --help` must not import what the commands use.
    rekey = sub.add_parser("rekey", help=HELP["rekey"], description=_DESCRIPTION)
    rekey.add_argument("ids", nargs="*", metavar="ID",
                       help="the sessions to reseal (none: --all)")
    rekey.add_argument("--all", action="store_true", help="every session of the store")
    rekey.add_argument("--store", metavar="URL",
                       help="the store (default: $DSH_SESSION_STORE, else the user's data "
                            "folder)")
    rekey.add_argument("--key-env", metavar="NAME", help=KEY_ENV_HELP)
    rekey.add_argument("--json", action="store_true", help="print what was done as JSON")
    rekey.set_defaults(run=_rekey)


def _rekey(args: argparse.Namespace) -> int:
    from .._persistence.encryption.sealed import SealedBackend
    from .._persistence.store.durable import DurableStore
    from ..errors import DshSessionError
    from .source import open_backend, out_json, out_text, store_url
    from .support import one_line

    if bool(args.ids) == bool(args.all):
        msg = "name the sessions to reseal, or pass --all (not both)"
        raise Failure(msg, EXIT_USAGE)
    url = store_url(args)
    backend = open_backend(url)
    if not isinstance(backend, SealedBackend):
        backend.close()
        msg = "rekey needs the store's keys, and none were given"
        raise Failure(msg, EXIT_USAGE,
                      hint="set DSH_SESSION_KEYS (kid:base64key,... the first the new "
                           "key, then the old ones) or name the variable with --key-env")
    done, failed = [], []
    interrupted = None
    with DurableStore(backend) as store:
        ids = args.ids or [h.id for h in store.stored()]
        named = list(dict.fromkeys(ids))
        try:
            for session_id in named:
                try:
                    done.append(store.rekey(session_id))
                except (DshSessionError, OSError) as exc:
                    failed.append({"id": session_id, "error": one_line(exc)})
        except KeyboardInterrupt as exc:  # what was done is printed, then said
            interrupted = exc
    if args.json:
        out_json({"rekeyed": [{"id": r.session_id, "records": r.records, "keyId": r.key_id,
                               "oldKeyIds": list(r.old_key_ids),
                               "plaintext": r.plaintext} for r in done],
                  "failed": failed})
    else:
        for r in done:
            old = "plaintext" if r.plaintext else ", ".join(r.old_key_ids) or "-"
            out_text(f"{r.session_id}: {r.records} record(s) sealed under {r.key_id} "
                     f"(were: {old})\n")
        for f in failed:
            out_text(f"{f['id']}: not rekeyed: {f['error']}\n")
    if interrupted is not None:
        raise _stopped(named, len(done), len(failed)) from interrupted  # exits 130
    return EXIT_REJECTED if failed else 0


def _stopped(named: list[str], done: int, failed: int) -> Failure:
    """What an interrupted rekey did, and how to go on. Each session is rewritten at once
    (a temp file renamed, one transaction): the one the interrupt came in has its old
    records or its new ones."""
    from .term import printable

    msg = (f"interrupted: rekeyed {done} of {len(named)} session(s) (printed above); the "
           f"others keep their old records")
    if done + failed < len(named):
        msg += (f', the one being resealed ("{printable(named[done + failed])}") its old '
                f"ones or its new ones, whole")
    return Failure(msg, hint=f"run the same command again to rekey the rest (the {done} "
                             f"rekeyed are resealed again, harmlessly)")
