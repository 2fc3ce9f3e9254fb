"""ADK sessions as ``dsh-session ls``, ``show`` and the viewer list them: labelled with
their app, user and ADK session id (the ``label_session`` hook), the app and user state
sessions hidden unless asked (``hide_session``, ``ls --all``); and the hooks as a third
party's plugin uses them through core's public functions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from google.adk.events.event import Event
from google.genai import types

from dsh_session_adk import DshSessionService, dsh_session_id
from dsh_session_core import (
    Event as DshEvent,
)
from dsh_session_core import (
    SessionHeader,
    create_plugin_manager,
    hookimpl,
    is_hidden,
    label_of,
    open_store,
    stored_label,
)

APP, USER = "weather", "ada"
SESSION = dsh_session_id(APP, USER, "chat-1")
STATES = {dsh_session_id(APP), dsh_session_id(APP, USER)}
LABEL = "app weather · user ada · session chat-1"


pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")


@pytest.fixture
def store(store_url: str) -> str:
    """A store holding one ADK session (with app and user state) and a plain session."""
    url = store_url

    async def fill() -> None:
        async with DshSessionService(url) as service:
            s = await service.create_session(app_name=APP, user_id=USER, session_id="chat-1",
                                             state={"app:units": "metric", "user:lang": "fr"})
            content = types.Content(role="user", parts=[types.Part(text="hi")])
            await service.append_event(s, Event(author="user", invocation_id="i",
                                                content=content))

    asyncio.run(fill())
    with open_store(url) as st:
        plain = st.create("plain")
        _one_turn(plain)
        st.flush(plain)
        st.release(plain)
    return url


def _one_turn(session: Any) -> None:
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                         "source": {"kind": "user"}}})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def _cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", *args],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("sort", ["created", "activity"])  # headers only; every summary
def test_ls_labels_adk_sessions_and_hides_the_state_sessions(store: str, sort: str) -> None:
    rows = json.loads(_cli("ls", "--store", store, "--sort", sort, "--json"))
    assert {r["id"]: r.get("label") for r in rows} == {SESSION: LABEL, "plain": None}
    every = json.loads(_cli("ls", "--store", store, "--sort", sort, "--all", "--json"))
    assert {r["id"]: r.get("label") for r in every} == {
        SESSION: LABEL, "plain": None,
        dsh_session_id(APP): "app weather · state",
        dsh_session_id(APP, USER): "app weather · user ada · state"}
    assert set(_cli("ls", "--store", store, "-q", "--sort", sort).split()) == {
        SESSION, "plain"}
    assert set(_cli("ls", "--store", store, "-qa", "--sort", sort).split()) == {
        SESSION, "plain", *STATES}
    table = _cli("ls", "--store", store, "--sort", sort).splitlines()
    assert table[0].split()[:2] == ["ID", "NAME"]
    row = next(line for line in table if line.startswith(SESSION))
    # The NAME column shows the name one types for it (show, rm...: issue 40), a state
    # session its label.
    assert row.split()[1] == "weather/ada/chat-1"
    state = _cli("ls", "--store", store, "--sort", sort, "--all").splitlines()
    assert "app weather · state" in next(line for line in state
                                         if line.startswith(dsh_session_id(APP)))
    assert table[-1].startswith("2 session(s)")


def test_show_names_the_adk_session(store: str) -> None:
    assert _cli("show", "--store", store, SESSION).splitlines()[1].strip() == LABEL
    assert json.loads(_cli("show", "--store", store, "--json", SESSION))["label"] == LABEL
    assert "label" not in json.loads(_cli("show", "--store", store, "--json", "plain"))


@contextlib.contextmanager
def _viewer(url: str) -> Iterator[str]:
    sys.path.insert(0, str(Path(__file__).parent.parent / "view"))
    from server_support import running

    from dsh_session_core._cli.support import registry
    from dsh_session_view import make_server

    server = make_server(registry(), url=url, host="127.0.0.1", port=0)
    with running(server) as served:
        yield served.url.rstrip("/")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_the_viewer_lists_and_names_as_ls_does(store: str) -> None:
    with _viewer(store) as base:
        rows = _get(base + "/api/sessions")
        assert {r["id"]: r.get("label") for r in rows} == {SESSION: LABEL, "plain": None}
        every = _get(base + "/api/sessions?all=1")
        assert {r["id"] for r in every} == {SESSION, "plain", *STATES}
        assert _get(base + f"/api/session/{SESSION}")["label"] == LABEL


class _ThirdParty:
    """A plugin of someone else's: hides ``tmp-*`` sessions, names ``job-*`` ones from
    their first event."""

    @hookimpl
    def hide_session(self, header: SessionHeader) -> bool | None:
        return True if header.id.startswith("tmp-") else None

    @hookimpl
    def label_session(self, header: SessionHeader,
                      first_events: Callable[[int], Sequence[DshEvent]]) -> str | None:
        if not header.id.startswith("job-"):
            return None
        first = first_events(1)
        return f"job starting with {first[0].type}" if first else "empty job"


def test_a_third_partys_plugin_uses_the_same_hooks(tmp_path: Path) -> None:
    pm = create_plugin_manager()
    pm.register(_ThirdParty())
    with open_store(str(tmp_path / "logs"), plugin_manager=pm) as st:
        job = st.create("job-1")
        _one_turn(job)
        st.flush(job)
        st.release(job)
        headers = {h.id: h for h in st.stored()}
        assert stored_label(st.backend, headers["job-1"], st.registry,
                            plugins=pm) == "job starting with turn/start"
    asked: list[int] = []

    def never(n: int) -> Sequence[DshEvent]:
        asked.append(n)
        return []

    tmp = SessionHeader(version=0, id="tmp-1", created_at=0)
    assert is_hidden(tmp, plugins=pm)
    assert not is_hidden(headers["job-1"], plugins=pm)
    assert label_of(tmp, never, plugins=pm) is None
    assert asked == []  # a label from the header alone reads no log
