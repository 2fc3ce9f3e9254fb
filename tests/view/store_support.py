"""Stores the viewer tests look at, written through the public API: a session of many
plain turns, as long as a test needs to see the document paged."""

from __future__ import annotations

from dsh_session_core import open_store

__all__ = ["write_chat", "write_turns"]


def write_turns(store: str, session_id: str, turns: int) -> None:
    """Store ``session_id`` in the store at ``store`` with ``turns`` turns, each a user
    question ``question N`` answered by ``answer N`` in one step."""
    with open_store(store) as s:
        chat = s.create(session_id)
        for t in range(1, turns + 1):
            with chat.turn() as turn:
                turn.user(f"question {t}")
                with turn.step() as step:
                    step.assistant(f"answer {t}")
        s.flush(chat)


def write_chat(store: str, secret: str) -> str:
    """Store ``chat-1`` (cwd ``/home/ada/project``): one turn, the user saying
    ``secret``, the assistant "noted". Returns ``store``."""
    with open_store(store) as s:
        chat = s.create("chat-1", cwd="/home/ada/project")
        with chat.turn() as turn:
            turn.user(secret)
            with turn.step() as step:
                step.assistant("noted")
        s.flush(chat)
    return store
