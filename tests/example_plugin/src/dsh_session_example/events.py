"""The example plugin's event types: payload Structs and event classes."""

from __future__ import annotations

from msgspec import Struct

from dsh_session_core import Event, Message, SurfaceEvent
from dsh_session_core.vocabulary import TextBlock


class ExamplePingData(Struct, frozen=True, kw_only=True, rename="camel", gc=False,
                      forbid_unknown_fields=True):
    turn: int
    note: str


class ExamplePing(Event, tag="example/ping", frozen=True):
    """A heartbeat recorded in the log; it never reaches the model."""

    data: ExamplePingData


class ExampleNoteData(Struct, frozen=True, kw_only=True, rename="camel", gc=False,
                      forbid_unknown_fields=True):
    text: str


class ExampleNote(SurfaceEvent, tag="example/note", frozen=True):
    """A note for the model, rendered as ``<note>...</note>`` user content."""

    data: ExampleNoteData

    def message(self) -> Message:
        return Message(role="user", content=(TextBlock(text=f"<note>{self.data.text}</note>"),))
