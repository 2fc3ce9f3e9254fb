"""A projection's fold run over events: the changes a batch makes to a session's rows.

The one place a projection's :attr:`~dsh_session_core.Projection.fold` is called, by
the write path (a flush's batch, a catch-up, a rebuild) and by readers (a log's tail
past the stored rows, or the whole log where no rows are kept): both compute the same
:class:`~.._persistence.rows.RowChanges`, so rows read back equal rows folded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from ..._base.json_values import enc_hook
from ..._schema.projections import Clear, Delete, Projection, Put, Summary
from ...errors import PluginError
from ...events import Event
from ..rows import Mark, RowChanges, encode_mark

__all__ = ["ROW_ENCODER", "fold_changes", "mark_after"]

#: Rows are stored as JSON, as the log is: every value an event holds fits (an int past
#: 64 bits too, which MessagePack refuses), and it decodes straight into the row's
#: Struct. A row may hold a value of a decoded event as it is (its read-only forms).
ROW_ENCODER: Final = msgspec.json.Encoder(enc_hook=enc_hook)


def mark_after(projection: Projection, last: Event | None) -> Mark:
    """The mark of rows that fold the log up to ``last`` (``None``: an empty log)."""
    if last is None:
        return Mark(projection.version, 0)
    return Mark(projection.version, last.seq + 1, last.type, last.time)


def fold_changes(projection: Projection, events: Iterable[Event], mark: Mark, *,
                 rebuild: bool = False, into: RowChanges | None = None) -> RowChanges:
    """The changes ``events`` (the log's next ones, in order) make, with ``mark`` as
    the mark after them; ``rebuild``: from no rows at all; ``into``: added to those.

    :raises PluginError: the fold raised, or made something that is not a change of
        the projection's declared types (named, with the event's seq).
    """
    out = into if into is not None else RowChanges(projection.name, b"", rebuild=rebuild)
    out.mark = encode_mark(mark)
    types = projection.types
    rows = out.rows
    encode = ROW_ENCODER.encode
    row_type = projection.row
    for event in events:
        if event.type not in types:
            continue
        try:
            changes = projection.fold(event)
            for change in changes:
                cls = change.__class__
                if cls is Put:
                    assert isinstance(change, Put)
                    if (change.row.__class__ is not row_type
                            or not _storable(change.key)):
                        raise _bad(projection, event, change)
                    rows[change.key] = encode(change.row)
                elif cls is Delete:
                    assert isinstance(change, Delete)
                    if not _storable(change.key):
                        raise _bad(projection, event, change)
                    rows[change.key] = None
                elif cls is Clear:
                    out.clear = True
                    rows.clear()
                elif cls is Summary:
                    assert isinstance(change, Summary)
                    out.summary_set = True
                    out.summary = None if change.row is None else encode(change.row)
                else:
                    raise _bad(projection, event, change)
        except PluginError:
            raise
        except Exception as exc:
            msg = (f'projection "{projection.name}" failed to fold event {event.seq} '
                   f'("{event.type}"): {type(exc).__name__}: {exc}; the log is whole, the '
                   f"projection's rows are not kept: fix or uninstall its plugin, then "
                   f"run dsh-session reindex")
            raise PluginError(msg) from exc
    return out


def _storable(key: object) -> bool:
    """Whether every backend can store ``key``: a str with a UTF-8 form and no NUL."""
    if key.__class__ is not str:
        return False
    assert isinstance(key, str)
    if "\x00" in key:
        return False
    try:
        key.encode()
    except UnicodeEncodeError:
        return False
    return True


def _bad(projection: Projection, event: Event, change: object) -> PluginError:
    return PluginError(
        f'projection "{projection.name}" folded event {event.seq} ("{event.type}") into '
        f"{change!r}: a fold makes Put (a key and a {projection.row.__name__}), Delete, "
        f"Clear or Summary changes, each key a str of text (no NUL, no lone surrogate)")
