"""What a conversation's dsh session holds, read back: its entries and its newest
record (:class:`ConversationLog`), from the stored lines of the plugin's events alone
(:func:`read_log`) or from a live session's events (:func:`fold_events`); and the
pydantic JSON the entries and records are kept as.

pydantic-ai's own adapters (de)serialize its types: ``ModelMessagesTypeAdapter`` for a
message, a ``TypeAdapter`` of ``ConversationRecord`` for a record, so what is stored is
exactly what pydantic-ai's JSON of them is. msgspec splits the lines.
"""

from __future__ import annotations

__all__ = ["DELETED", "ENTRY", "RECORD", "ConversationLog", "dump_message", "dump_record",
           "fold_events", "load_message", "load_record", "plain", "read_log"]

from collections.abc import Iterable
from typing import Any

import msgspec
import pydantic
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from dsh_session_core import DurableStore, Event, PersistenceError, to_wire

from .events import PydanticAiDeleted, PydanticAiEntry, PydanticAiRecord

ENTRY, RECORD, DELETED = "pydantic-ai/entry", "pydantic-ai/record", "pydantic-ai/deleted"
_TYPES = (ENTRY, RECORD, DELETED)
_RECORD_TYPES = (RECORD, DELETED)
_DECODER = msgspec.json.Decoder(list[PydanticAiEntry | PydanticAiRecord | PydanticAiDeleted])
_RECORDS: pydantic.TypeAdapter[ConversationRecord] = pydantic.TypeAdapter(ConversationRecord)


def dump_message(message: ModelMessage) -> Any:
    """A message as the JSON value ``ModelMessagesTypeAdapter`` gives it."""
    return ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]


def load_message(value: Any) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_python([value])[0]


def dump_record(record: ConversationRecord) -> Any:
    return _RECORDS.dump_python(record, mode="json")


def load_record(value: Any) -> ConversationRecord:
    return _RECORDS.validate_python(value)


class ConversationLog:
    """The entries of a conversation's session (id to parent id and message JSON, the
    copies a fork took of its source's included) and its newest record or deletion.

    :ivar record: the newest record's JSON, ``None`` when there is none or it was deleted.
    :ivar revision: the newest record's revision (``None``: none, or deleted).
    :ivar turns: the number of the last ``turn/start`` (live sessions only, else 0).
    """

    __slots__ = ("entries", "record", "revision", "turns")

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str | None, Any]] = {}
        self.record: Any = None
        self.revision: str | None = None
        self.turns = 0

    def add(self, event: PydanticAiEntry | PydanticAiRecord | PydanticAiDeleted) -> None:
        if isinstance(event, PydanticAiEntry):
            data = event.data
            self.entries[data.entry_id] = (data.parent_id, data.message)
        elif isinstance(event, PydanticAiRecord):
            self.record, self.revision = event.data.record, event.data.revision
        else:
            self.record = self.revision = None

    def head_id(self) -> str | None:
        return None if self.record is None else plain(self.record)["head_id"]

    def entry(self, entry_id: str) -> ConversationEntry:
        """A fresh entry object (a copy: changing it changes nothing stored)."""
        parent_id, message = self.entries[entry_id]
        return ConversationEntry(id=entry_id, parent_id=parent_id,
                                 message=load_message(plain(message)))

    def chain(self, head_id: str | None, limit: int | None = None) -> list[str]:
        """The ids from the first entry up to ``head_id``, or the last ``limit``.

        :raises KeyError: an id the log does not hold.
        """
        ids: list[str] = []
        entry_id = head_id
        while entry_id is not None and (limit is None or len(ids) < limit):
            ids.append(entry_id)
            entry_id = self.entries[entry_id][0]
        ids.reverse()
        return ids


def plain(value: Any) -> Any:
    """A payload value of a live session's event (frozen for the log) as plain JSON;
    one decoded from lines is plain already."""
    return value if isinstance(value, dict) else to_wire(value)


def fold_events(events: Iterable[Event]) -> ConversationLog:
    """The log of a live (or read) session's events."""
    log = ConversationLog()
    for event in events:
        if isinstance(event, PydanticAiEntry | PydanticAiRecord | PydanticAiDeleted):
            log.add(event)
        elif event.type == "turn/start":
            log.turns = max(log.turns, event.data.turn)
    return log


def read_log(store: DurableStore, session_id: str, *, entries: bool = True
             ) -> ConversationLog | None:
    """The log of what is stored under ``session_id``, read from the lines of the
    plugin's events only (no writer lock taken, nothing repaired); without ``entries``,
    its records only. ``None`` when nothing is stored there."""
    try:
        lines = store.read_lines(session_id, types=_TYPES if entries else _RECORD_TYPES)
    except PersistenceError:
        return None
    log = ConversationLog()
    if not lines:
        return log
    try:
        decoded = _DECODER.decode(b"[" + b",".join(lines) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        # A line of another layout (written by hand): the session's own decoding decides.
        try:
            return fold_events(store.read_session(session_id).events)
        except PersistenceError:
            return None
    for event in decoded:
        log.add(event)
    return log
