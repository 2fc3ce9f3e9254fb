"""How an ``events`` row becomes its log line: the line kept, else the one its columns rebuild.

An ``events`` row (SQLite's, PostgreSQL's: the reference's columns) gives the line kept
for it as it was appended, else the one its columns rebuild, in the reference's
spelling and key order, ``type, seq, time, data[, sourceEventSeqs][, surfaceOp]``, but
for a crash-repair closer, which the reference writes ``surfaceOp`` first
(:func:`closer_row`). The databases build the same lines in SQL
(``sqlite.schema.REBUILT``, ``postgres.schema.LINE``); :func:`~.rows.kept_lines` keeps a
line where this rebuild would not give it back.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from ...._schema.codec import ENCODER

__all__ = ["CLOSER_DATA_END", "Row", "closer_row", "rebuilt_line", "row_line"]

#: One ``events`` row as the scan reads it: ``(seq, type, time, data,
#: source_event_seqs, surface_op)``, the JSON columns as their text, then (where the
#: backend keeps lines) the line kept for it, or ``None`` (:func:`~.rows.kept_lines`).
Row: TypeAlias = (
    "tuple[int, str, int, str, str | None, str | None]"
    " | tuple[int, str, int, str, str | None, str | None, str | None]"
)

#: How the ``data`` column of a crash-repair closer for a tool call ends (after its
#: ``turn``, ``step`` and ``callId``), as the reference writes it (spec core §7): how a
#: closer's row is known (:func:`closer_row`), whoever stored it.
CLOSER_DATA_END: Final = (
    ',"content":[{"type":"text","text":"Tool call interrupted by a crash; no result was'
    ' recorded."}],"isError":true,"error":{"name":"InterruptedError","code":"interrupted"}}'
)


def _column(text: str) -> bytes:
    # A column that parsed can hold a raw newline only as whitespace between tokens;
    # a space keeps its meaning and keeps the log line on one line.
    return text.replace("\n", " ").encode()


def row_line(row: Row) -> bytes:
    """The row's log line: the line kept for it, else the line its columns rebuild, in
    the reference's key order ``type, seq, time, data[, sourceEventSeqs][,
    surfaceOp]`` (a crash-repair closer's: ``surfaceOp`` first, :func:`closer_row`)."""
    if len(row) > 6 and row[6] is not None:
        return row[6].encode()
    return rebuilt_line(row)


def closer_row(type_: object, data: str, sources: object, op: object) -> bool:
    """Whether a row is a crash-repair closer for a tool call that was logged, as the
    reference writes it (spec core §7): a ``tool/result`` appended to the surface with
    its call's seq, whose payload is the closer's (:data:`CLOSER_DATA_END`). The
    reference writes its ``surfaceOp`` before its ``sourceEventSeqs``, so its line is
    rebuilt in that order, whoever stored the row (the reference, an older build)."""
    return (type_ == "tool/result" and op == '"append"' and sources is not None
            and data.startswith('{"turn":') and data.endswith(CLOSER_DATA_END))


def rebuilt_line(row: Row) -> bytes:
    """The line the row's columns rebuild, whatever line is kept for it."""
    seq, type_, time, data, sources, op = row[:6]
    parts = [
        b'{"type":', ENCODER.encode(type_), b',"seq":%d,"time":%d,"data":' % (seq, time),
        _column(data),
    ]
    if sources is not None and op is not None and closer_row(type_, data, sources, op):
        parts += (b',"surfaceOp":', _column(op), b',"sourceEventSeqs":', _column(sources))
    else:
        if sources is not None:
            parts += (b',"sourceEventSeqs":', _column(sources))
        if op is not None:
            parts += (b',"surfaceOp":', _column(op))
    parts.append(b"}")
    return b"".join(parts)
