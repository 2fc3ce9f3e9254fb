"""``dsh-session ls``: the sessions in a store, with their size and last activity.

Each row: id, cwd, created, events, turns, last activity (the time of the last event),
parent. The rows are the backend's :meth:`~.._persistence.base.Backend.summaries`:
nothing is decoded into events, nothing is written, no lock is taken. What that costs is
the backend's (documented there): JSONL reads each log once without parsing JSON, SQLite
and PostgreSQL run one aggregate query; either way O(store size), never JSON decoded.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from .support import EXIT_OK, Failure

if TYPE_CHECKING:
    from .._persistence.base import SessionSummary

__all__ = ["run_ls"]


def _row(summary: SessionSummary) -> dict[str, Any]:
    from .describe import wire_of

    row: dict[str, Any] = wire_of(summary.header)
    del row["type"]
    row.update(events=summary.events, turns=summary.turns,
               lastActivity=summary.last_activity, torn=summary.torn)
    return row


def _rows(url: str, named: bool) -> list[dict[str, Any]]:
    """The rows of the store at ``url``; a store the user ``named`` (``--store``,
    ``$DSH_SESSION_STORE``) must exist, the default one lists nothing until written."""
    from .source import open_backend

    backend = open_backend(url)
    if named and not backend.exists():
        backend.close()
        msg = f"no store at {url}"
        sqlite = f"sqlite://{url}" if url.startswith("/") else f"sqlite:{url}"
        hint = (f"a SQLite database is named by its URL: --store {sqlite}"
                if url.endswith(".db")
                else "check the path: a store is made by the first session written to it")
        raise Failure(msg, hint=hint)
    try:
        summaries = backend.summaries()
    except OSError as exc:
        msg = f"cannot list the store {url}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    finally:
        backend.close()
    rows = [_row(s) for s in summaries]
    rows.sort(key=lambda r: (_number(r.get("createdAt")), r["id"]))
    return rows


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def run_ls(args: argparse.Namespace) -> int:
    from .describe import field, when
    from .source import out_json, out_text, store_url
    from .term import Style, printable, text_table

    url = store_url(args)
    rows = _rows(url, named=bool(args.store or os.environ.get("DSH_SESSION_STORE")))
    if args.json:
        out_json(rows)
        return EXIT_OK
    if not rows:
        out_text(f"no sessions in {url}\n")
        return EXIT_OK
    style = Style.for_stream(sys.stdout)
    table = [["ID", "CREATED", "LAST ACTIVITY", "EVENTS", "TURNS", "CWD", "PARENT"]]
    for r in rows:
        table.append([
            r["id"], when(r.get("createdAt")), when(r["lastActivity"]),
            str(r["events"]) + (" +torn" if r["torn"] else ""), str(r["turns"]),
            field(r["cwd"]) if "cwd" in r else "-",
            field(r["parentSession"]) if "parentSession" in r else "-",
        ])
    lines = text_table([[printable(c) for c in row] for row in table], right={3, 4})
    lines[0] = style(lines[0], "bold")
    out_text("\n".join(lines) + f"\n{len(rows)} session(s) in {url}\n")
    return EXIT_OK
