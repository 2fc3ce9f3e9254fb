"""The errors of ``dsh-session-pydantic-ai``: each is pydantic-ai's own (so an
application's ``except ConversationConflict`` keeps working) and dsh-session's
(:class:`~dsh_session_core.errors.DshSessionError`), carrying the session it is about."""

from __future__ import annotations

__all__ = ["ConversationRevisionConflict", "EntryNotFoundError"]

from pydantic_ai.conversation_store import ConversationConflict

from dsh_session_core.errors import DshSessionError


class ConversationRevisionConflict(ConversationConflict, DshSessionError):
    """A save, branch, fork or delete found the conversation's stored revision other
    than the one it expected (saved or deleted since it was loaded, created by another
    writer, a fork into an id already taken, or a head the log does not hold).

    Checked under the session's writer lock: of two writers saving on one revision,
    the first wins and the second gets this. Load the conversation again and retry.

    :ivar conversation_id: the conversation, which is also the dsh session id.
    :ivar expected: the revision the caller held (``None``: it expected none stored).
    :ivar stored: the revision stored (``None``: none, or deleted).
    :ivar reason: what did not match, in words.
    """

    def __init__(self, conversation_id: str, *, expected: str | None, stored: str | None,
                 reason: str) -> None:
        super().__init__(conversation_id)
        self.expected = expected
        self.stored = stored
        self.reason = reason
        self.args = (f"{self.args[0]} ({reason}: expected revision {expected!r}, stored "
                     f"{stored!r}; dsh session {conversation_id!r})",)


class EntryNotFoundError(DshSessionError, KeyError):
    """No conversation read by this store holds the entry (``read_entry``): it is a
    :class:`KeyError`, as pydantic-ai's in-memory store raises, so the store's history
    reads tell a concurrent delete from a broken log.

    :ivar entry_id: the entry asked for.
    """

    def __init__(self, entry_id: str) -> None:
        super().__init__(
            f"entry {entry_id!r} is in no conversation this store has read: read the "
            f"conversation's record first (load, load_entries), which reads its entries")
        self.entry_id = entry_id

    def __str__(self) -> str:
        return str(self.args[0])
