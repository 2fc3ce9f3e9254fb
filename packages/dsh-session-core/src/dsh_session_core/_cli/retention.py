"""``dsh-session prune`` and ``retain``: retention from the command line.

Retention from the command line (the rules are :class:`~.policy.RetentionPolicy`'s and
``DurableStore.prune``'s).

``prune --older-than DURATION [--cwd] [--keep N]`` alone is the first form, as it always
was. Any of ``--keep-latest``, ``--per``, ``--max-size``, ``--archive`` or ``--policy
FILE`` (a TOML policy a team checks in; the options given beside it override its keys)
makes a policy, and prints a plan: each session kept or removed, and by which rule.
``prune --log`` prints what retention removed from the store (its retention ledger).
``retain ID...`` marks sessions never to be pruned; ``--release`` takes the mark off.

Asking is ``rm``'s (``lifecycle.py``): on a terminal, shows what would go and asks;
without one, refuses without ``--yes``; ``--dry-run`` removes nothing and needs no
``--yes``. Exit codes: 0 done; 1 a session failed to go (or to archive), or not
confirmed; 2 bad usage (a bad duration, size, grouping or policy file); 130 interrupted
(Ctrl-C), saying which sessions were removed before it: those listed before the run and
gone after it (:func:`_removing`).
"""

from __future__ import annotations

import argparse
import sys

from .commands import HELP
from .lifecycle import (
    _NOT_CONFIRMED,
    _STORE_HELP,
    _confirm,
    _Formatter,
    _line,
    _must_be_able_to_ask,
    _open,
    _total,
    _wire,
    parse_duration,
)
from .support import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Failure

TYPE_CHECKING = False

if TYPE_CHECKING:
    import datetime
    from collections.abc import Callable
    from typing import TypeVar

    from .._persistence.retention.plan import PruneDecision, PruneReport
    from .._persistence.retention.policy import RetentionPolicy
    from .._persistence.store.durable import DurableStore

    T = TypeVar("T")

# What the commands run is imported in the functions that run it: `dsh-session prune --help`
# imports this module to build the parser, with argparse alone (the store, read-model and
# terminal modules would cost it some 100-250 ms).

__all__ = ["add_commands"]

#: The options that make a policy (the first form has none of them).
_POLICY_OPTIONS = ("keep_latest", "per", "max_size", "archive", "policy")


def _policy(args: argparse.Namespace) -> RetentionPolicy:
    """The policy the options (and ``--policy FILE``) say.

    :raises Failure: a bad value or file (usage).
    """
    import dataclasses
    import os

    from .._persistence.retention.policy import RetentionPolicy, parse_size

    if args.keep is not None:
        msg = "--keep belongs to the plain --older-than form: with a policy, use --keep-latest"
        raise Failure(msg, EXIT_USAGE)
    try:
        fields: dict[str, object] = {}
        if args.older_than is not None:
            fields["older_than"] = parse_duration(args.older_than)
        if args.keep_latest is not None:
            fields["keep_latest"] = args.keep_latest
        if args.per:
            per = tuple(p.strip() for given in args.per for p in given.split(","))
            if "" in per:  # not the whole store, which no --per is
                shown = " ".join(f"--per {given!r}" for given in args.per)
                msg = (f"{shown} names an empty grouping: --per takes cwd, label, user, "
                       f"app or label:NAME (leave --per out to group the whole store)")
                raise Failure(msg, EXIT_USAGE)
            fields["per"] = per
        if args.max_size is not None:
            fields["max_total_bytes"] = parse_size(args.max_size)
        if args.archive is not None:
            fields["archive_to"] = args.archive
        if args.cwd is not None:
            fields["cwd"] = os.path.abspath(args.cwd)
        if args.policy is None:
            return RetentionPolicy(**fields)  # type: ignore[arg-type]
        base = RetentionPolicy.from_toml(args.policy)
        return dataclasses.replace(base, **fields)  # type: ignore[arg-type]
    except OSError as exc:
        msg = f"cannot read the policy file {args.policy}: {exc.strerror or exc}"
        raise Failure(msg, EXIT_USAGE) from None
    except ValueError as exc:
        raise Failure(str(exc), EXIT_USAGE,
                      hint="see `dsh-session prune --help` and docs/retention.md") from None


def _size(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _plan_table(report: PruneReport) -> str:
    """The plan as a table: one row a session, what happens to it and why."""
    from .._inspect.describe import when
    from .term import printable, shorten, text_table

    rows = [["ACTION", "ID", "RULE", "LAST ACTIVITY", "BYTES", "GROUP"]]
    for d in report.decisions:
        rows.append([_action(d, report.dry_run), printable(shorten(d.session_id, 60)),
                     d.rule, when(d.last_activity), _size(d.bytes),
                     "/".join("-" if g is None else printable(g) for g in d.group) or "-"])
    return "\n".join(text_table(rows, right={4})) + "\n"


def _action(d: PruneDecision, dry_run: bool) -> str:
    if not d.remove:
        return "keep"
    return {"would-delete": "would remove", "deleted": "removed",
            "failed": "FAILED"}.get(d.status, d.status)


def _summary(report: PruneReport) -> str:
    gone = report.removed
    if report.dry_run:
        text = (f"would remove {len(gone)} session(s), {report.bytes_freed:,} bytes "
                f"(dry run: nothing was removed)")
    else:
        text = f"removed {len(gone)} session(s), {report.bytes_freed:,} bytes freed"
    kept = len(report.kept)
    text += f"; kept {kept}"
    if report.failed:
        text += f"; {len(report.failed)} failed"
    if report.over_quota:
        text += "; still over --max-size (the rest is kept by a rule)"
    return text + "\n"


def _removing(store: DurableStore, shown: str, prune: Callable[[], T]) -> T:
    """Run ``prune`` (a removing one: a dry run needs none of this); on Ctrl-C, say which
    sessions it had removed: those the store listed before it and lists no more after
    (what the store holds says so whatever point the interrupt came at), the others as
    they were. Running the same command again removes the rest: its rules keep what they
    kept, and the sessions already gone count neither way; every removal done is recorded
    in the ledger, which ``prune --log`` lists."""
    from .term import printable

    before = [h.id for h in store.stored()]
    try:
        return prune()
    except KeyboardInterrupt:
        hint = ("run the same command again to remove the rest; `dsh-session prune --log` "
                "lists the removals recorded")
        try:
            left = {h.id for h in store.stored()}
        except Exception as exc:  # said, in place of what cannot be told
            from .support import one_line

            msg = (f"interrupted: some sessions of {shown} may have been removed (the store "
                   f"cannot be listed: {one_line(exc)})")
            raise Failure(msg, hint=hint) from None
        gone = sorted(i for i in before if i not in left)
        if not gone:
            msg = f"interrupted: nothing was removed from {shown}"
            raise Failure(msg, hint=hint) from None
        names = ", ".join(printable(i) for i in gone[:5])
        if len(gone) > 5:
            names += f" and {len(gone) - 5} more"
        msg = (f"interrupted: removed {len(gone)} session(s) from {shown} ({names}); the "
               f"others are as they were")
        raise Failure(msg, hint=hint) from None


def _run_policy(store: DurableStore, policy: RetentionPolicy, args: argparse.Namespace,
                shown: str, now: datetime.datetime) -> int:
    from ..errors import DshSessionError
    from .source import out_json, out_text

    try:
        if not args.dry_run and not args.yes:
            plan = store.prune(policy, dry_run=True, now=now)
            if plan.removed:
                sys.stderr.write(_plan_table(plan))
                question = (f"remove {len(plan.removed)} session(s) from {shown} "
                            f"({plan.bytes_freed:,} bytes)?")
                if not _confirm(question):
                    raise Failure(_NOT_CONFIRMED)
        if args.dry_run:
            report = store.prune(policy, dry_run=True, now=now)
        else:
            report = _removing(store, shown,
                               lambda: store.prune(policy, dry_run=False, now=now))
    except ValueError as exc:  # an archive that is the store itself
        raise Failure(str(exc), EXIT_USAGE) from None
    except (DshSessionError, OSError) as exc:
        from .support import one_line

        raise Failure(one_line(exc)) from None
    if args.json:
        out_json({"store": shown, **report.to_wire()})
        return EXIT_REJECTED if report.failed else EXIT_OK
    out_text(_plan_table(report) if report.decisions else "")
    for d in report.failed:
        sys.stderr.write(f"dsh-session: error: {d.session_id} was not removed: "
                         f"{d.reason}\n")
    out_text(_summary(report))
    return EXIT_REJECTED if report.failed else EXIT_OK


def _run_plain(store: DurableStore, args: argparse.Namespace, shown: str,
               now: datetime.datetime) -> int:
    """The first form: ``--older-than`` (``--cwd``, ``--keep``) only."""
    import os

    from .source import out_json, out_text

    older_than = parse_duration(args.older_than)
    keep = 0 if args.keep is None else args.keep
    if keep < 0:
        msg = f"--keep takes a count of sessions (0 or more), got {keep}"
        raise Failure(msg, EXIT_USAGE)
    cwd = args.cwd
    if cwd is not None and not os.path.isabs(cwd):
        cwd = os.path.abspath(cwd)
    try:
        if not args.dry_run and not args.yes:
            plan = store.prune(older_than, cwd=cwd, keep=keep, dry_run=True, now=now)
            going = [d for d in plan if d.status == "would-delete"]
            if going:
                for d in plan:
                    sys.stderr.write(_line(d) + "\n")
                question = (f"remove {len(going)} session(s) from {shown} "
                            f"({_total(going):,} bytes)?")
                if not _confirm(question):
                    raise Failure(_NOT_CONFIRMED)
        if args.dry_run:
            found = store.prune(older_than, cwd=cwd, keep=keep, dry_run=True, now=now)
        else:
            found = _removing(store, shown, lambda: store.prune(
                older_than, cwd=cwd, keep=keep, dry_run=False, now=now))
    except OSError as exc:
        msg = f"cannot list the store {shown}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    failed = [d for d in found if d.status == "failed"]
    if args.json:
        out_json({"store": shown, "olderThan": args.older_than, "cwd": cwd,
                  "keep": keep, "dryRun": args.dry_run,
                  "sessions": [_wire(d) for d in found],
                  "bytes": _total([d for d in found if d.status in ("deleted",
                                                                   "would-delete")])})
        return EXIT_REJECTED if failed else EXIT_OK
    for d in found:
        if d.status != "failed":
            out_text(_line(d) + "\n")
    for d in failed:
        sys.stderr.write(f"dsh-session: error: {_line(d)}\n")
    gone = [d for d in found if d.status in ("deleted", "would-delete")]
    locked = sum(d.status == "locked" for d in found)
    if args.dry_run:
        summary = (f"would remove {len(gone)} session(s), {_total(gone):,} bytes "
                   f"(dry run: nothing was removed)")
    else:
        summary = f"removed {len(gone)} session(s), {_total(gone):,} bytes freed"
    if locked:
        summary += f"; {locked} skipped (a writer holds them)"
    if failed:
        summary += f"; {len(failed)} failed"
    out_text(summary + "\n")
    return EXIT_REJECTED if failed else EXIT_OK


def _log(store: DurableStore, args: argparse.Namespace, shown: str) -> int:
    """``prune --log``: what was removed from the store (by prune, rm or a program's
    delete), oldest first."""
    from .._inspect.describe import when
    from .._inspect.describe import wire_of as wire
    from .source import out_json, out_text
    from .term import printable, text_table

    records = store.removals()
    if args.json:
        out_json({"store": shown, "removals": [
            {"time": r.time, **wire(r.data)} for r in records]})
        return EXIT_OK
    if not records:
        out_text(f"nothing was removed from {shown} (as its retention ledger records)\n")
        return EXIT_OK
    rows = [["WHEN", "ID", "RULE", "BYTES", "ARCHIVED TO", "POLICY"]]
    for r in records:
        d = r.data
        rows.append([when(r.time), printable(d.session_id), d.rule, _size(d.bytes),
                     printable(d.archived_to or "-"), printable(d.policy)])
    out_text("\n".join(text_table(rows, right={3})) + "\n"
             f"{len(records)} removal(s) from {shown}\n")
    return EXIT_OK


def _prune(args: argparse.Namespace) -> int:
    import datetime

    policy_form = any(getattr(args, o) not in (None, []) for o in _POLICY_OPTIONS)
    if args.log:
        if policy_form or args.older_than is not None:
            msg = "--log prints what was removed: give it no rule"
            raise Failure(msg, EXIT_USAGE)
        store, shown = _open(args)
        with store:
            return _log(store, args, shown)
    if not policy_form and args.older_than is None:
        msg = ("prune needs a rule: --older-than DURATION, --keep-latest N, "
               "--max-size SIZE or --policy FILE")
        raise Failure(msg, EXIT_USAGE, hint="`dsh-session prune --help` shows them")
    policy = _policy(args) if policy_form else None
    if policy is None:
        parse_duration(args.older_than)  # a usage error before asking anything
    if not args.dry_run:
        _must_be_able_to_ask(args, "prune sessions",
                             "pass --yes to prune without being asked, or --dry-run to "
                             "see what would be removed")
    now = datetime.datetime.now(datetime.UTC)  # one moment for the question and the run
    store, shown = _open(args)
    with store:
        if policy is None:
            return _run_plain(store, args, shown, now)
        return _run_policy(store, policy, args, shown, now)


def _retain(args: argparse.Namespace) -> int:
    from ..errors import DshSessionError, SessionNotStoredError
    from .source import out_json, out_text
    from .support import not_stored_failure, one_line
    from .term import printable

    store, shown = _open(args)
    changed: list[str] = []
    problems: list[str] = []
    with store:
        try:
            store.retained()  # a ledger whose marks cannot be told is not written
        except (DshSessionError, OSError) as exc:
            raise Failure(printable(one_line(exc))) from None
        for session_id in dict.fromkeys(args.ids):
            try:
                if store.retain(session_id, not args.release, note=args.note):
                    changed.append(session_id)
            except SessionNotStoredError as exc:
                if exc.session_id == session_id:
                    problems.append(str(not_stored_failure(exc, shown)))
                else:
                    problems.append(printable(one_line(exc)))
            except (DshSessionError, ValueError, OSError) as exc:
                problems.append(printable(one_line(exc)))
        marked = store.retained()
    if args.json:
        out_json({"store": shown, "changed": changed, "retained": marked,
                  "errors": problems})
        return EXIT_REJECTED if problems else EXIT_OK
    for message in problems:
        sys.stderr.write(f"dsh-session: error: {message}\n")
    verb = "released" if args.release else "retained"
    for session_id in args.ids:
        if session_id in changed:
            out_text(f"{verb} {printable(session_id)}\n")
    out_text(f"{len(marked)} session(s) retained in {shown} (never pruned)\n")
    return EXIT_REJECTED if problems else EXIT_OK


_PRUNE_DESCRIPTION = """\
Remove the sessions a retention policy names, and say why. The plain form removes
those idle for longer than --older-than (the --keep newest of them kept). A policy
(--keep-latest, --per, --max-size, --archive, or --policy FILE) applies its rules in
order: sessions marked by `dsh-session retain` and those a live writer holds stay;
the --keep-latest newest of each group (--per) stay; then those older than
--older-than go; then, while the rest is over --max-size, the oldest go. With
--archive, each is copied into that store and checked before it is removed. Every
removal (prune's, rm's, a program's) is recorded: --log prints them. On a terminal,
shows the plan and asks."""

_PRUNE_EXAMPLE = """\
example:
  dsh-session prune --older-than 30d --keep-latest 5 --per cwd --max-size 10G --dry-run"""

_RETAIN_DESCRIPTION = """\
Mark sessions never to be pruned (--release takes the mark off). The marks live in
the store's retention ledger, a session of the store that `copy` carries along; a
session removed (rm) takes its mark with it. On an encrypted store, a --note is sealed
with the keys, and refused without them."""


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prune = sub.add_parser("prune", help=HELP["prune"], description=_PRUNE_DESCRIPTION,
                           epilog=_PRUNE_EXAMPLE, formatter_class=_Formatter)
    prune.add_argument("--older-than", metavar="DURATION",
                       help="remove sessions idle for longer than this: 30d, 12h, 90m, 2w, "
                            "45s (or several: 1d12h)")
    prune.add_argument("--cwd", metavar="PATH",
                       help="only the sessions of this working directory")
    prune.add_argument("--keep", type=int, metavar="N",
                       help="(plain form) keep the N newest of the sessions that would go")
    prune.add_argument("--keep-latest", type=int, metavar="N",
                       help="keep the N newest sessions of each group, whatever their age")
    prune.add_argument("--per", action="append", metavar="GROUPING",
                       help="what --keep-latest groups by: cwd, label, user, app, or "
                            "label:NAME (repeat, or a,b, for each combination)")
    prune.add_argument("--max-size", metavar="SIZE",
                       help="remove the oldest until the rest fits: 500M, 10G, 1T")
    prune.add_argument("--archive", metavar="URL",
                       help="copy each session into this store, and check it, before "
                            "removing it (e.g. jsonl+zstd:////srv/archive)")
    prune.add_argument("--policy", metavar="FILE",
                       help="a TOML policy file ([retention] older_than, keep_latest, "
                            "per, max_size, archive, cwd); options given override it")
    prune.add_argument("--log", action="store_true",
                       help="print every removal from the store (prune, rm, a program's "
                            "delete), and when")
    prune.add_argument("--dry-run", action="store_true",
                       help="print the plan; remove nothing")
    prune.add_argument("--store", metavar="URL", help=_STORE_HELP)
    prune.add_argument("--yes", "-y", action="store_true",
                       help="remove without asking (needed when stdin is not a terminal)")
    prune.add_argument("--json", action="store_true", help="print the report as JSON")
    prune.set_defaults(run=_prune)

    retain = sub.add_parser("retain", help=HELP["retain"], description=_RETAIN_DESCRIPTION,
                            epilog="example:\n  dsh-session retain chat-1 --note 'the demo'",
                            formatter_class=_Formatter)
    retain.add_argument("ids", nargs="+", metavar="ID", help="the id of a session")
    retain.add_argument("--release", action="store_true",
                        help="take the mark off: the session may be pruned again")
    retain.add_argument("--note", metavar="TEXT", help="why, recorded with the mark")
    retain.add_argument("--store", metavar="URL", help=_STORE_HELP)
    retain.add_argument("--json", action="store_true", help="print the marks as JSON")
    retain.set_defaults(run=_retain)
