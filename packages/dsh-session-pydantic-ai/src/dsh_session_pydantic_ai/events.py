"""The plugin's log-only event types: pydantic-ai's conversation entries and records kept
verbatim, and the deletion that ends a conversation.

``pydantic-ai/entry`` holds one ``ConversationEntry`` (its id, its parent's id, and its
message as pydantic-ai's ``ModelMessagesTypeAdapter`` dumps it); ``pydantic-ai/record``
one ``ConversationRecord`` as pydantic dumps it (the newest one is the conversation's);
``pydantic-ai/deleted`` says the conversation was deleted at that revision. Each save
writes them inside one turn, with the typed events the messages are recorded as.
"""

from __future__ import annotations

__all__ = ["PydanticAiDeleted", "PydanticAiDeletedData", "PydanticAiEntry",
           "PydanticAiEntryData", "PydanticAiRecord", "PydanticAiRecordData"]

from typing import Any

from msgspec import Struct

from dsh_session_core import Event


class PydanticAiEntryData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``pydantic-ai/entry``: ``{"entryId", "parentId", "message"}``, the
    message the JSON of ``ModelMessagesTypeAdapter`` (one element of its list)."""

    entry_id: str
    parent_id: str | None
    message: Any


class PydanticAiEntry(Event, tag="pydantic-ai/entry", frozen=True):
    """One pydantic-ai ``ConversationEntry``, kept verbatim as it was stored; the typed
    events recording its message follow it. Log-only: the conversation is derived from
    those typed events."""

    data: PydanticAiEntryData


class PydanticAiRecordData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``pydantic-ai/record``: ``{"revision", "record"}``, the record the
    JSON pydantic dumps of a ``ConversationRecord``; its revision also on its own, the
    token a save is checked against (read without decoding the record)."""

    revision: str
    record: Any


class PydanticAiRecord(Event, tag="pydantic-ai/record", frozen=True):
    """A pydantic-ai ``ConversationRecord`` written by a save, a branch or a fork: the
    newest one in the log is the conversation's (its head, usage, scope, branches and
    revision). Log-only."""

    data: PydanticAiRecordData


class PydanticAiDeletedData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``pydantic-ai/deleted``: the revision that was deleted."""

    revision: str


class PydanticAiDeleted(Event, tag="pydantic-ai/deleted", frozen=True):
    """The conversation was deleted at ``revision``: it no longer loads or lists, and a
    save creates it anew. Written under the session's writer lock, so no save can land
    between the revision check and the deletion. Log-only."""

    data: PydanticAiDeletedData
