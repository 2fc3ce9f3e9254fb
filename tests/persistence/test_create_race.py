"""Two writers create one new id at once (two processes, as the OpenAI Agents SDK's
sessions may): whichever writes second gets ``SessionExistsError`` at its first flush,
whatever its backend's own refusal was (a log file that exists, a duplicate key), and the
first writer's log is untouched.

The race is made deterministic: the second store's lock acquisition (which comes after
its create found no stored session) first lets the whole first writer run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import open_store
from dsh_session_core.errors import SessionExistsError


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "jsonl":
        return str(tmp_path / "store")
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("postgresql_url"))


def test_the_second_creator_of_an_id_is_told_it_exists(url: str) -> None:
    with open_store(url) as first, open_store(url) as second:
        acquire = second.backend.acquire

        def first_writer_wins(header: Any) -> Any:
            session = first.create("x")
            with session.turn() as turn:
                turn.user("first")
            first.release(session)
            return acquire(header)

        second.backend.acquire = first_writer_wins  # type: ignore[method-assign]
        late = second.create("x")
        with late.turn() as turn:
            turn.user("second")
        with pytest.raises(SessionExistsError, match='session "x" already exists'):
            second.flush(late)
        second.detach(late)
        stored = first.open("x")
        assert [e.type for e in stored.events] == ["turn/start", "user/message", "turn/end"]
        assert stored.events[1].data.content[0].text == "first"
        first.release(stored)
