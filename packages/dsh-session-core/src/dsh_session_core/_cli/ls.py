"""``dsh-session ls``: the sessions in a store, with their size and last activity.

Each row: id, cwd, created, events, turns, last activity (the time of the last event),
parent. Nothing is decoded into events, nothing is written, no lock is taken.

What it costs, per store:

- JSONL: the log files are found as the backend's ``list()`` finds them (every
  ``*.jsonl`` in every bucket, header from its first line), then each is read once,
  sequentially, in 1 MiB chunks, without parsing JSON: its complete lines after the
  header are its events, the lines starting ``{"type":"turn/start",`` its turns (a JSON
  string cannot hold a raw newline, so the pattern cannot match inside a text; the
  backends always write ``type`` first), and its last complete line, read from the end,
  gives the last activity. A torn last line is not counted, and flagged.
- SQLite: the backend's ``list()``, then one aggregate query over the events' primary-key
  index (count, turn starts, the time of the highest seq per session).

Either way O(store size) bytes scanned, never JSON decoded.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .support import EXIT_OK, Failure

if TYPE_CHECKING:
    from .._header import SessionHeader
    from .._persistence.postgres import PostgresBackend
    from .._persistence.sqlite import SqliteBackend

__all__ = ["run_ls"]

#: What counts as a turn in a JSONL log: a line that starts with this.
_TURN_LINE = b'\n{"type":"turn/start",'


def _jsonl_logs(root: str) -> list[tuple[SessionHeader, str]]:
    """Every log under a JSONL store's root with its header, as ``list()`` finds them."""
    from .._persistence.jsonl import list_logs

    return list_logs(root)


def _jsonl_counts(path: str) -> tuple[int, int, Any, bool]:
    """A JSONL log's events, turns, last event time and whether it has a torn tail."""
    from .source import last_lines
    from .tail import _complete_end, _wire

    lines = turns = 0
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            lines += chunk.count(b"\n")
            window = tail + chunk  # a turn line may straddle two chunks
            turns += window.count(_TURN_LINE)
            tail = window[-(len(_TURN_LINE) - 1) :]
        size = f.tell()
        end = _complete_end(f, size)
        last = last_lines(f, end, 1)
    wire = _wire(last[0]) if last else None
    return max(lines - 1, 0), turns, None if wire is None else wire.get("time"), end < size


def _sqlite_counts(backend: SqliteBackend) -> dict[str, tuple[int, int, Any]]:
    rows = backend._conn.execute(
        "SELECT e.session_id, e.n, e.turns, t.time FROM ("
        " SELECT session_id, count(*) AS n, sum(type = 'turn/start') AS turns,"
        " max(seq) AS last FROM events GROUP BY session_id) AS e"
        " JOIN events AS t ON t.session_id = e.session_id AND t.seq = e.last"
    ).fetchall()
    return {sid: (n, turns, last) for sid, n, turns, last in rows}


def _postgres_counts(backend: PostgresBackend) -> dict[str, tuple[int, int, Any]]:
    with backend._lock:
        rows = backend._conn.execute(
            "SELECT e.session_id, e.n, e.turns, t.time FROM ("
            " SELECT session_id, count(*) AS n, count(*) FILTER (WHERE type = 'turn/start')"
            " AS turns, max(seq) AS last FROM events GROUP BY session_id) AS e"
            " JOIN events AS t ON t.session_id = e.session_id AND t.seq = e.last"
        ).fetchall()
    return {sid: (n, turns, last) for sid, n, turns, last in rows}


def _row(header: SessionHeader, events: Any, turns: Any, last: Any, torn: bool
         ) -> dict[str, Any]:
    from .describe import wire_of

    row: dict[str, Any] = wire_of(header)
    del row["type"]
    row.update(events=events, turns=turns, lastActivity=last, torn=torn)
    return row


def _rows(url: str) -> list[dict[str, Any]]:
    from .._persistence.postgres import PostgresBackend  # psycopg is imported only on connect
    from .._persistence.sqlite import SqliteBackend
    from .source import open_backend

    backend = open_backend(url)
    rows = []
    try:
        root = getattr(backend, "root", None)
        if isinstance(root, str):  # JSONL
            for header, path in _jsonl_logs(root):
                try:
                    rows.append(_row(header, *_jsonl_counts(path)))
                except OSError:  # removed since it was listed
                    continue
        elif isinstance(backend, SqliteBackend | PostgresBackend):
            counts = (_sqlite_counts(backend) if isinstance(backend, SqliteBackend)
                      else _postgres_counts(backend))
            for header in backend.list():
                rows.append(_row(header, *counts.get(header.id, (0, 0, None)), torn=False))
        else:
            msg = f"cannot list {url}: unsupported store"
            raise Failure(msg)
    except OSError as exc:
        msg = f"cannot list the store {url}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    finally:
        backend.close()
    rows.sort(key=lambda r: (_number(r.get("createdAt")), r["id"]))
    return rows


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def run_ls(args: argparse.Namespace) -> int:
    from .describe import field, when
    from .source import out_json, out_text, store_url
    from .term import Style, printable, text_table

    url = store_url(args)
    rows = _rows(url)
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
