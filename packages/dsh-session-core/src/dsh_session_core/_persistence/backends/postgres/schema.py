"""The PostgreSQL backend's side of the database: the schema and every statement.

The schema, every statement, and the rules for what a text column and a NOTIFY channel
can hold.

The tables and columns are the reference's (``sessions``, ``events`` with primary key
``(session_id, seq)``, JSON kept as the text it was written as), plus ``events.line``:
the log line as it was appended, kept only where the columns would not give it back
byte for byte (:func:`~.rows.kept_lines`: another writer's spelling, an opaque event's
key order), so every log survives a round trip byte for byte; a
one-row ``dsh_session_schema`` table that holds the schema version, checked (and an
older one migrated) on open (:mod:`.postgres.open`); and the full-text search index's
(``search_docs``: each searched event's words as a ``tsvector``; ``search_state``: how
far each session is indexed), whose statements are :mod:`.postgres.index`'s; and the
projections' (``dsh_projection_rows``, ``dsh_projection_marks``: :mod:`.sql.projection_rows`),
written by :mod:`.postgres.projections`.
A batch becomes one array per column (:func:`batch_columns`), checked before any
transaction; a connection string names a database (:func:`database_of`) and is shown
without its password (:func:`redacted`).
The backend class is :mod:`.postgres.backend`'s; the follower, :mod:`.follow`'s.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Any, Final

from ...._schema.header import SessionHeader
from ....errors import PersistenceError, UnstorableError
from ....events import Event
from ..sql.row_lines import CLOSER_DATA_END
from ..sql.rows import PARAMS_PER_ROW, batch_rows, header_row

__all__ = [
    "APPEND",
    "CREATE_LINE_TRIGGER",
    "DELETE_EVENTS",
    "DELETE_SESSION",
    "DELETE_TAIL",
    "INDEX_SCHEMA",
    "INSERT_ROWS",
    "NOTIFY",
    "PROJECTION_SCHEMA",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SELECT_AFTER",
    "SELECT_CHUNK",
    "SELECT_FOUND",
    "SELECT_HEADER",
    "SELECT_HEADERS",
    "SELECT_LAST",
    "SELECT_MEASURE",
    "SELECT_RANGE",
    "SELECT_ROWS",
    "SELECT_STORED_ROWS",
    "SELECT_SUMMARIES",
    "SELECT_SUMMARIES_OF",
    "SELECT_TAIL",
    "SELECT_TYPES",
    "UPSERT_SESSION",
    "Columns",
    "Refused",
    "batch_columns",
    "channel_of",
    "checked_header",
    "conflict",
    "database_of",
    "lock_key",
    "redacted",
    "same_rows",
    "storable_text",
    "text_ok",
]

#: The version in ``dsh_session_schema``; a database of another version is refused,
#: except versions 1 to 3, which are upgraded in place when opened
#: (:mod:`.postgres.open`). Version 2 added the search index; version 3 ``events.line``
#: (the lines the columns would not give back); version 4 the projections' tables
#: (:data:`PROJECTION_SCHEMA`). Each bump makes the builds before it refuse the
#: database: a version-1 build's deletes would leave index rows behind, a version-2
#: build would write closers whose lines nothing keeps, and a version-3 build's rekey
#: would leave rows sealed under the old key beside a log resealed under the new one.
SCHEMA_VERSION: Final = 4

SCHEMA: Final = (
    """CREATE TABLE dsh_session_schema (
        version integer NOT NULL,
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row)
    )""",
    """CREATE TABLE sessions (
        id text PRIMARY KEY,
        version integer NOT NULL,
        created_at bigint NOT NULL,
        cwd text,
        parent_session text,
        seed_length bigint
    )""",
    # The primary key's index yields one session's rows in seq order (the load reads a
    # range of it) and makes a duplicate seq fail the whole batch.
    """CREATE TABLE events (
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        type text NOT NULL,
        time bigint NOT NULL,
        data text NOT NULL,
        source_event_seqs text,
        surface_op text,
        line text,
        PRIMARY KEY (session_id, seq)
    )""",
    # Listing, newest first, and by project folder.
    "CREATE INDEX sessions_by_created_at ON sessions (created_at, id)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, created_at)",
)

#: Forgets a kept line when its row is changed by hand (the row then speaks for itself
#: again), unless the same UPDATE sets the line.
CREATE_LINE_TRIGGER: Final = (
    """CREATE OR REPLACE FUNCTION dsh_session_forget_line() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN NEW.line := NULL; RETURN NEW; END $$""",
    """CREATE TRIGGER dsh_session_forget_line
    BEFORE UPDATE OF session_id, seq, type, time, data, source_event_seqs, surface_op
    ON events FOR EACH ROW
    WHEN (OLD.line IS NOT NULL AND NEW.line IS NOT DISTINCT FROM OLD.line)
    EXECUTE PROCEDURE dsh_session_forget_line()""",
)

# The search index, added by version 2. ``words`` holds our index words as the lexemes
# (array_to_tsvector: no parser, no stemming), or NULL for an event whose words would
# pass the 1 MiB a tsvector holds: such a row is a candidate of every search (the
# partial index finds them). ``turn`` may be search_index.TURN_UNKNOWN: look it up.
INDEX_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS search_docs (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        turn integer,
        words tsvector,
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE INDEX IF NOT EXISTS search_docs_words ON search_docs USING GIN (words)",
    "CREATE INDEX IF NOT EXISTS search_docs_unsized ON search_docs (session_id, seq)"
    " WHERE words IS NULL",
    """CREATE TABLE IF NOT EXISTS search_state (
        session_id text PRIMARY KEY,
        next_seq bigint NOT NULL,
        turn integer
    )""",
)

# The projections' tables, added by version 4. Keys compare by code point (``COLLATE
# "C"``: UTF-8 bytes), the order a projection's reads promise, so a key range is a range
# of the primary key; the summaries are listed from their partial index alone. A
# session's rows go with its sessions row, whoever deletes it (this backend's delete and
# prune, a hand edit), in the same transaction: the trigger's function deletes from the
# tables of the deleted row's schema, whatever the deleting connection's search_path.
PROJECTION_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS dsh_projection_rows (
        session_id text NOT NULL,
        projection text NOT NULL,
        key text COLLATE "C" NOT NULL,
        row bytea NOT NULL,
        PRIMARY KEY (session_id, projection, key)
    )""",
    """CREATE TABLE IF NOT EXISTS dsh_projection_marks (
        session_id text NOT NULL,
        projection text NOT NULL,
        mark bytea NOT NULL,
        summary bytea,
        PRIMARY KEY (session_id, projection)
    )""",
    "CREATE INDEX IF NOT EXISTS dsh_projection_summaries ON dsh_projection_marks"
    " (projection, session_id) WHERE summary IS NOT NULL",
    """CREATE OR REPLACE FUNCTION dsh_session_forget_projections() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN
        EXECUTE format('DELETE FROM %I.dsh_projection_rows WHERE session_id = $1',
                       TG_TABLE_SCHEMA) USING OLD.id;
        EXECUTE format('DELETE FROM %I.dsh_projection_marks WHERE session_id = $1',
                       TG_TABLE_SCHEMA) USING OLD.id;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER dsh_session_forget_projections AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE PROCEDURE dsh_session_forget_projections()""",
)

UPSERT_SESSION: Final = """
    INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET
        version = excluded.version, created_at = excluded.created_at, cwd = excluded.cwd,
        parent_session = excluded.parent_session, seed_length = excluded.seed_length"""

# The batch's rows, unnested from one array per column. Parameters go in binary (``%b``):
# as text, psycopg would escape every quote of every JSON text, which cost about half of
# a flush's client time.
ROWS: Final = """
    INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op,
                        line)
    SELECT %(sid)b, r.seq, r.type, r.time, r.data, nullif(r.src, ''), nullif(r.op, ''),
           nullif(r.line, '')
    FROM unnest(%(seqs)b::bigint[], %(types)b::text[], %(times)b::bigint[],
                %(datas)b::text[], %(srcs)b::text[], %(ops)b::text[], %(lines)b::text[])
         AS r(seq, type, time, data, src, op, line)"""

# A batch in one statement (one round trip, its own transaction when autocommit): the
# rows go in only if the stored log ends right before them, checked in the same
# statement, and then the session's channel is notified. No row back means refused, and
# nothing was written; a writer that raced past the check fails on the primary key (its
# insert waits for ours, then finds the duplicate).
APPEND: Final = f"""
    WITH ins AS ({ROWS}
        WHERE (SELECT coalesce(max(seq), -1) FROM events WHERE session_id = %(sid)b)
              = %(before)b
        RETURNING 1)
    SELECT pg_notify(%(channel)b, %(last)b) FROM (SELECT count(*) AS n FROM ins) AS c
    WHERE c.n > 0"""

INSERT_ROWS: Final = ROWS

DELETE_TAIL: Final = "DELETE FROM events WHERE session_id = %s AND seq >= %s"
NOTIFY: Final = "SELECT pg_notify(%s, %s)"
# Every read of rows: the columns, then the kept line (NULL where the columns are the line).
_ROW: Final = "SELECT seq, type, time, data, source_event_seqs, surface_op, line FROM events"
SELECT_LAST: Final = "SELECT coalesce(max(seq), -1) FROM events WHERE session_id = %s"
SELECT_RANGE: Final = (
    f"{_ROW}"
    " WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)
SELECT_AFTER: Final = (
    f"{_ROW}"
    " WHERE session_id = %s AND seq > %s ORDER BY seq"
)
SELECT_HEADERS: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length FROM sessions"
    " ORDER BY created_at, id"
)
SELECT_HEADER: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length,"
    " (SELECT min(seq) FROM events WHERE session_id = %(sid)s),"
    " (SELECT max(seq) FROM events WHERE session_id = %(sid)s)"
    " FROM sessions WHERE id = %(sid)s"
)
SELECT_ROWS: Final = (
    f"{_ROW}"
    " WHERE session_id = %s ORDER BY seq"
)
SELECT_STORED_ROWS: Final = (
    f"{_ROW}"
    " WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
)

# A crash-repair closer's row (rows.closer_row): the reference writes its surfaceOp
# first. Tested in this order, most rows leave at the first test.
_CLOSER: Final = (
    "source_event_seqs IS NOT NULL AND surface_op = '\"append\"' AND type = 'tool/result'"
    f" AND left(data, 8) = '{{\"turn\":' AND right(data, {len(CLOSER_DATA_END)})"
    f" = '{CLOSER_DATA_END.replace(chr(39), chr(39) * 2)}'"
)
# Each row's log line: the one kept for it, else the one the server builds in the key
# order of the log format (``type, seq, time, data[, sourceEventSeqs][, surfaceOp]``; a
# closer's surfaceOp first). to_json escapes a string exactly like JSON.stringify and
# our encoder ("\"", "\\", \b \f \n \r \t, other control characters as \u00xx,
# everything else verbatim).
_HEAD: Final = (
    "'{\"type\":' || to_json(type)::text || ',\"seq\":' || seq || ',\"time\":' || time"
    " || ',\"data\":' || data"
)
LINE: Final = (
    f"coalesce(line, CASE WHEN {_CLOSER} THEN {_HEAD}"
    " || ',\"surfaceOp\":' || surface_op || ',\"sourceEventSeqs\":' || source_event_seqs"
    f" || '}}' ELSE {_HEAD}"
    " || coalesce(',\"sourceEventSeqs\":' || source_event_seqs, '')"
    " || coalesce(',\"surfaceOp\":' || surface_op, '') || '}' END)"
)
SELECT_CHUNK: Final = (
    f"SELECT count(*), convert_to(string_agg({LINE}, E'\\n' ORDER BY seq), 'UTF8')"
    " FROM events WHERE session_id = %s AND seq >= %s AND seq < %s"
)

# Deleting a session: what it holds (the header, the count of events, the size of their
# log lines, each with its newline, and the time of the last one), then its rows, by the
# exact id.
SELECT_MEASURE: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length,"
    " (SELECT count(*) FROM events WHERE session_id = %(sid)s),"
    f" (SELECT coalesce(sum(octet_length({LINE}) + 1), 0) FROM events"
    " WHERE session_id = %(sid)s),"
    " (SELECT time FROM events WHERE session_id = %(sid)s ORDER BY seq DESC LIMIT 1)"
    " FROM sessions WHERE id = %(sid)s"
)
DELETE_EVENTS: Final = "DELETE FROM events WHERE session_id = %s"
DELETE_SESSION: Final = "DELETE FROM sessions WHERE id = %s"

# Reading without writing: listing with counts in one query (an aggregate over the
# events' primary key, then the time of each session's highest seq), and a tail by the
# primary key, newest first.
SELECT_SUMMARIES: Final = (
    "SELECT s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length,"
    " coalesce(e.n, 0), coalesce(e.turns, 0), t.time FROM sessions AS s"
    " LEFT JOIN (SELECT session_id, count(*) AS n,"
    " count(*) FILTER (WHERE type = 'turn/start') AS turns, max(seq) AS last"
    " FROM events GROUP BY session_id) AS e ON e.session_id = s.id"
    " LEFT JOIN events AS t ON t.session_id = e.session_id AND t.seq = e.last"
)
# The counts of a page of sessions (``ls``): per id, its own range of the events' primary
# key, so a page costs what its sessions hold, whatever the store's size.
SELECT_SUMMARIES_OF: Final = (
    "SELECT s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length,"
    " (SELECT count(*) FROM events WHERE session_id = s.id),"
    " (SELECT count(*) FROM events WHERE session_id = s.id AND type = 'turn/start'),"
    " (SELECT time FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)"
    " FROM sessions AS s WHERE s.id = ANY(%s)"
)
SELECT_FOUND: Final = "SELECT 1 FROM sessions WHERE id = %s"
# The rows of some types (``lines_of_types``): the session's key range, filtered.
SELECT_TYPES: Final = (
    f"{_ROW}"
    " WHERE session_id = %s AND type = ANY(%s) ORDER BY seq"
)
SELECT_TAIL: Final = (
    f"{_ROW}"
    " WHERE session_id = %s AND seq <= %s ORDER BY seq DESC LIMIT %s"
)


def channel_of(session_id: str) -> str:
    """The NOTIFY channel of a session: a hash, since ids are not identifiers."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"dsh_session_{digest[:40]}"


def lock_key(session_id: str) -> int:
    """The session's advisory lock key: 64 bits of a hash of its id."""
    digest = hashlib.sha256(b"dsh-session lease\0" + session_id.encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


def redacted(url: str) -> str:
    """The URL (or libpq keyword string) without its password, for messages."""
    if "://" in url:
        from ...urls import printable_url  # every store URL's rule

        return printable_url(url)
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(url)
    except Exception:  # an unparsable string is reported by connect, not here
        return url
    params.pop("password", None)
    return make_conninfo("", **params)


def text_ok(value: str) -> bool:
    """Whether a PostgreSQL text column can hold ``value``: no NUL, no lone surrogate."""
    if "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def storable_text(session_id: str, what: str, value: object, seq: int | None) -> None:
    """Refuse a value no PostgreSQL text column can hold (:func:`text_ok`)."""
    if not isinstance(value, str) or text_ok(value):
        return
    problem = "a NUL character" if "\x00" in value else "a lone surrogate"
    msg = (
        f"{what} of session {session_id!r} holds {problem}, which a PostgreSQL text "
        f"column cannot store"
    )
    raise UnstorableError(msg, session_id=session_id, seq=seq)


Columns = dict[str, Any]


def batch_columns(
    session_id: str, events: Sequence[Event], jsonl: bytes
) -> tuple[Columns, int]:
    """The batch as column arrays for ``unnest`` (checked before any transaction), and
    the seq the stored log must end at for it to follow. An absent optional column is
    ``''`` (stored as NULL: JSON text is never empty), and so is the line of a row that
    gives it back (:func:`~.rows.kept_lines`).

    :param jsonl: the batch's log lines as appended."""
    params, kept = batch_rows(session_id, events, jsonl, "PostgreSQL")
    n = PARAMS_PER_ROW
    seqs, types, times = params[0::n], params[1::n], params[2::n]
    for event_type in set(types):  # a batch has few distinct types
        storable_text(session_id, f"the type {event_type!r}", event_type,
                       seqs[types.index(event_type)])  # type: ignore[arg-type]
    for prev, seq in itertools.pairwise(seqs):
        if seq != prev + 1:  # type: ignore[operator]
            msg = f'batch of session "{session_id}" is not contiguous at seq {seq}'
            raise PersistenceError(msg, session_id=session_id)
    lines = [""] * len(seqs)
    for i, line in kept:
        lines[i] = line
    columns = {"sid": session_id, "seqs": seqs, "types": types, "times": times,
               "datas": params[3::n], "srcs": params[4::n], "ops": params[5::n],
               "lines": lines, "channel": channel_of(session_id), "last": str(seqs[-1])}
    return columns, seqs[0] - 1  # type: ignore[operator]


def checked_header(header: SessionHeader) -> tuple[Any, ...]:
    row = header_row(header, "PostgreSQL")
    for name, value in (("the id", row[0]), ("the cwd", row[3]), ("the parent", row[4])):
        storable_text(header.id, name, value, None)
    return row


def same_rows(stored: Sequence[tuple[Any, ...]], columns: Columns) -> bool:
    """Whether the stored rows are exactly the batch's."""
    mine = zip(columns["seqs"], columns["types"], columns["times"], columns["datas"],
               columns["srcs"], columns["ops"], columns["lines"], strict=True)
    return [tuple(r) for r in stored] == [(*row[:4], row[4] or None, row[5] or None,
                                           row[6] or None) for row in mine]


class Refused(Exception):
    """The checked insert wrote nothing: the stored log does not end before the batch."""


def conflict(session_id: str, last: int, first: int) -> PersistenceError:
    msg = (
        f'session "{session_id}" was written by another writer: the stored log ends at seq '
        f"{last}, but this batch starts at seq {first}; reopen the session to continue "
        f"from what is stored"
    )
    return PersistenceError(msg, session_id=session_id)


_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})


def database_of(url: str) -> tuple[str, ...] | None:
    """What picks the server, the database and the schema in it (the search_path can be
    set in options) in a connection string: not the password, timeouts, TLS or
    application name. ``None`` when libpq cannot parse it."""
    try:
        from psycopg import pq
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(url)
        defaults = {o.keyword.decode(): (o.val or b"").decode()
                    for o in pq.Conninfo.get_defaults()}
    except Exception:
        return None

    def param(name: str) -> str:
        value = params.get(name)
        return str(value) if value not in (None, "") else defaults.get(name, "")

    hosts = ",".join("localhost" if h in _LOOPBACK else h for h in param("host").split(","))
    user = param("user")
    return (param("service"), hosts, param("hostaddr"), param("port"), user,
            param("dbname") or user, param("options"))
