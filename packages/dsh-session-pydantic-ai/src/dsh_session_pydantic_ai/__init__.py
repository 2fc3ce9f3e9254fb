"""dsh-session as pydantic-ai's conversation store: :class:`DshConversationStore`,
pydantic-ai's ``ConversationStore`` on any dsh-session store, and the plugin's event
types.

::

    from pydantic_ai import Agent
    from dsh_session_pydantic_ai import DshConversationStore

    store = DshConversationStore("sqlite:///chats.db")
    conversation = await store.load("chat-1") or Conversation(conversation_id="chat-1")
    result = await Agent("openai:gpt-5").run("hello", conversation=conversation)
    await store.save(result)
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (every store and
# CLI command does) must not import pydantic-ai, which costs most of a second.
if _typing.TYPE_CHECKING:
    from ._store import DshConversationStore
    from .errors import ConversationRevisionConflict, EntryNotFoundError
    from .events import (
        PydanticAiDeleted,
        PydanticAiDeletedData,
        PydanticAiEntry,
        PydanticAiEntryData,
        PydanticAiRecord,
        PydanticAiRecordData,
    )

_LAZY: dict[str, str] = {
    "ConversationRevisionConflict": ".errors",
    "DshConversationStore": "._store",
    "EntryNotFoundError": ".errors",
    "PydanticAiDeleted": ".events",
    "PydanticAiDeletedData": ".events",
    "PydanticAiEntry": ".events",
    "PydanticAiEntryData": ".events",
    "PydanticAiRecord": ".events",
    "PydanticAiRecordData": ".events",
}

__all__ = [
    "ConversationRevisionConflict",
    "DshConversationStore",
    "EntryNotFoundError",
    "PydanticAiDeleted",
    "PydanticAiDeletedData",
    "PydanticAiEntry",
    "PydanticAiEntryData",
    "PydanticAiRecord",
    "PydanticAiRecordData",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__,
                                     distribution="dsh-session-pydantic-ai")
