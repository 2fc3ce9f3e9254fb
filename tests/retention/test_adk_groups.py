"""Keep-latest per ADK user and app: the ADK adapter's ``session_labels`` names each
session's app and user, from sessions written by its real session service, and prune
keeps the newest of each group; the app and user state sessions, which lists hide, are
no conversation and are kept (ADK needs them)."""

from __future__ import annotations

import asyncio
import datetime
import itertools

import pytest
from google.adk.events.event import Event
from google.genai import types

from dsh_session_adk import DshSessionService, dsh_session_id
from dsh_session_core import RetentionPolicy, named_labels, open_store

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite")

CHATS = [("weather", "ada", "a1"), ("weather", "bob", "b1"), ("weather", "ada", "a2"),
         ("maps", "ada", "m1"), ("weather", "ada", "a3")]


def _fill(url: str) -> None:
    ticks = itertools.count(1_700_000_000_000, 1000)  # every event a second later

    async def fill() -> None:
        store = open_store(url, clock=lambda: next(ticks))
        async with DshSessionService(store) as service:
            for app, user, sid in CHATS:  # written in this order: a3 is ada's newest
                s = await service.create_session(  # with app and user state: their sessions
                    app_name=app, user_id=user, session_id=sid,
                    state={"app:units": "metric", "user:lang": "fr"})
                content = types.Content(role="user", parts=[types.Part(text=sid)])
                await service.append_event(s, Event(author="user", invocation_id="i",
                                                    content=content))
        store.close()

    asyncio.run(fill())


def test_the_adk_adapter_names_app_and_user(store_url: str) -> None:
    _fill(store_url)
    with open_store(store_url) as store:
        header = next(h for h in store.stored() if h.id == dsh_session_id("maps", "ada", "m1"))
        assert named_labels(store.backend, header, store.registry,
                            plugins=store.plugin_manager) == {"app": "maps", "user": "ada"}


@pytest.mark.parametrize(("per", "kept"), [
    (("user",), {"b1", "a3"}),
    (("app", "user"), {"b1", "m1", "a3"}),
    (("app",), {"m1", "a3"}),
])
def test_keep_latest_per_adk_group(store_url: str, per: tuple[str, ...],
                                   kept: set[str]) -> None:
    _fill(store_url)
    ids = {dsh_session_id(app, user, sid): sid for app, user, sid in CHATS}
    with open_store(store_url) as store:
        report = store.prune(RetentionPolicy(keep_latest=1, per=per), dry_run=True,
                             now=datetime.datetime.now(datetime.UTC))
        chats = {ids[d.session_id]: d.remove for d in report.decisions if d.session_id in ids}
        assert {sid for sid, gone in chats.items() if not gone} == kept


def test_the_adk_state_sessions_are_kept_as_hidden(store_url: str) -> None:
    _fill(store_url)
    states = ({dsh_session_id(app) for app, _, _ in CHATS}
              | {dsh_session_id(app, user) for app, user, _ in CHATS})
    with open_store(store_url) as store:
        report = store.prune(RetentionPolicy(older_than=datetime.timedelta(0)),
                             now=datetime.datetime.now(datetime.UTC))
        kept = {d.session_id: d.rule for d in report.decisions if not d.remove}
        assert {i for i, rule in kept.items() if rule == "hidden"} == states
        assert len(report.removed) == len(CHATS)  # every conversation went
        assert states <= {h.id for h in store.stored()}
