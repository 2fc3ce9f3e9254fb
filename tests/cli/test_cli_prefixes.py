"""Issue 40, point 3: the read commands of the CLI (``show``, ``tail``, ``search
--session``; ``view`` in tests/view and tests/adk) take an unambiguous prefix of a
stored session's id, as git takes a short object id; an ambiguous one is refused
naming the candidates (exit 1, one line and a hint, no traceback); a session stored
under exactly the text wins over every prefix; ``rm`` never takes a prefix (refused,
the store untouched); a prefix never reaches the store API."""

from __future__ import annotations

import json

import pytest

from dsh_session_core import open_store
from dsh_session_core.errors import SessionNotStoredError
from dsh_session_core.testing import run_cli

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql")

IDS = ("chat", "chat-1", "chat-2", "notes-2026")


@pytest.fixture
def store_url(store_url: str) -> str:
    """The testing kit's fresh store of each kind, holding a session per id of IDS, each
    saying its own id."""
    with open_store(store_url) as store:
        for sid in IDS:
            session = store.create(sid)
            with session.turn() as turn:
                turn.user(f"hello from {sid}")
                with turn.step() as step:
                    step.assistant("hi")
            store.release(session)
    return store_url


@pytest.fixture(autouse=True)
def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "example")
    monkeypatch.setenv("NO_COLOR", "1")


def _shown(url: str, text: str) -> str:
    code, out, err = run_cli("show", "--json", "--store", url, text)
    assert code == 0, err
    return str(json.loads(out)["header"]["id"])


def test_a_unique_prefix_names_its_session(store_url: str) -> None:
    assert _shown(store_url, "notes") == "notes-2026"
    assert _shown(store_url, "chat-2") == "chat-2"
    code, out, err = run_cli("tail", "--json", "-n", "1", "--store", store_url, "note")
    assert code == 0, err
    assert json.loads(out)["type"] == "turn/end"
    code, out, err = run_cli("search", "hello", "--json", "--store", store_url,
                             "--session", "notes")
    assert code == 0, err
    assert [hit["session"] for hit in json.loads(out)] == ["notes-2026"]


def test_the_exact_id_wins_over_the_ids_it_starts(store_url: str) -> None:
    # "chat" is an id, and a prefix of chat-1 and chat-2 too: the id is the one.
    assert _shown(store_url, "chat") == "chat"
    code, out, err = run_cli("search", "hello", "--json", "--store", store_url,
                             "--session", "chat")
    assert code == 0, err
    assert {hit["session"] for hit in json.loads(out)} == {"chat"}


@pytest.mark.parametrize("command", [["show"], ["tail"], ["search", "hello", "--session"]])
def test_an_ambiguous_prefix_is_refused_naming_the_candidates(store_url: str,
                                                               command: list[str]) -> None:
    code, out, err = run_cli(*command, "chat-", "--store", store_url)
    assert (code, out) == (1, b"")
    assert "Traceback" not in err
    first, hint = err.splitlines()
    assert first.startswith('dsh-session: the id prefix "chat-" is ambiguous in ')
    assert first.endswith("2 ids start with it: chat-1, chat-2")
    assert hint == "hint: give more of the id, or the whole id"


def test_a_prefix_of_nothing_is_not_found(store_url: str) -> None:
    code, _, err = run_cli("show", "--store", store_url, "zzz")
    assert code == 1
    assert err.startswith('dsh-session: no session "zzz" in ')


def test_rm_refuses_a_prefix_and_leaves_the_store_untouched(store_url: str) -> None:
    code, out, err = run_cli("rm", "--yes", "--store", store_url, "notes")
    assert (code, out) == (1, b"")
    assert err.splitlines() == [
        f'dsh-session: no session "notes" in {store_url}',
        "hint: rm takes a whole id or a name, never an id prefix: ids starting so are "
        "notes-2026",
    ]
    with open_store(store_url) as store:
        assert sorted(h.id for h in store.stored()) == sorted(IDS)
    code, out, err = run_cli("rm", "--yes", "--store", store_url, "notes-2026")
    assert code == 0, err
    with open_store(store_url) as store:
        assert "notes-2026" not in {h.id for h in store.stored()}


def test_the_store_api_never_takes_a_prefix(store_url: str) -> None:
    with open_store(store_url) as store, pytest.raises(SessionNotStoredError):
        store.open("notes")
