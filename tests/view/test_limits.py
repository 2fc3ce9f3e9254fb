"""The viewer's numbers in a URL (``limit``, ``offset``, ``after``) read by one rule on
every route (issue 37): a limit is a whole number from 1, read as its route's cap when
larger (1,000 raw events, 500 search hits; the sessions have none); a negative, zero or
malformed one, a negative offset and a malformed seq are refused with 400 and a JSON
error naming the parameter, on every route that takes it. On a session of more than
1,000 events, through the real server on a free loopback port."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_support import running
from store_support import write_turns

from dsh_session_core._cli.support import registry
from dsh_session_view import ViewServer, make_server

#: Turns of the session: each is 6 events, so the session holds 3,600 (past the events'
#: cap) and 600 user messages "question N" (past the search's).
TURNS = 600
EVENTS = 6 * TURNS
EVENTS_CAP = 1000
SEARCH_CAP = 500
#: Every route that takes a limit, with what it answers items of.
LIMITED = ("/api/session/long/events?", "/api/search?q=question&", "/api/sessions?")
#: Limits no route takes: negative, zero, and what is not a whole number in digits
#: (int() would take "+5", " 5" and "1_0", and the Arabic-Indic digit five).
BAD_LIMITS = ("-1", "-1000", "0", "00", "abc", "1.5", "1e3", "+5", "%205", "1_0", "%D9%A5",
              "0x10", "-0")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ViewServer]:
    store = str(tmp_path_factory.mktemp("limits") / "store")
    write_turns(store, "long", TURNS)
    write_turns(store, "short", 1)
    with running(make_server(registry(), url=store, port=0)) as served:
        yield served


def _get(server: ViewServer, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=60) as answer:
            status, ctype, body = answer.status, answer.headers["Content-Type"], answer.read()
    except urllib.error.HTTPError as exc:
        status, ctype, body = exc.code, exc.headers["Content-Type"], exc.read()
    assert ctype == "application/json"
    return status, json.loads(body)


def _events(server: ViewServer, query: str) -> dict[str, Any]:
    status, answer = _get(server, "/api/session/long/events?" + query)
    assert status == 200, answer
    assert isinstance(answer, dict)
    return answer


def test_a_negative_limit_is_refused_not_every_event(server: ViewServer) -> None:
    assert _events(server, f"after={EVENTS - 2}")["events"][-1]["seq"] == EVENTS - 1
    status, answer = _get(server, "/api/session/long/events?limit=-1")
    assert status == 400, f"{len(answer.get('events', []))} events"
    assert answer["status"] == 400
    assert "limit" in answer["error"]
    assert "'-1'" in answer["error"]
    assert f"1 to {EVENTS_CAP}" in answer["error"]
    assert answer["hint"]


@pytest.mark.parametrize("path", LIMITED)
@pytest.mark.parametrize("limit", BAD_LIMITS)
def test_a_bad_limit_is_refused_on_every_route(server: ViewServer, path: str,
                                               limit: str) -> None:
    status, answer = _get(server, f"{path}limit={limit}")
    assert status == 400, answer
    assert answer["error"].startswith("limit takes a whole number")
    assert answer["hint"]


def test_search_limit_zero_is_not_every_hit(server: ViewServer) -> None:
    # limit=0 used to mean "no limit" to the search page: every hit, past the cap.
    status, answer = _get(server, "/api/search?q=question&limit=0")
    assert status == 400, f"{len(answer)} hits"


def test_a_limit_past_the_cap_is_read_as_the_cap(server: ViewServer) -> None:
    # 5,000 digits: more than int() reads (4,300), still a number, past any cap.
    for limit in (str(EVENTS_CAP + 1), "99999", str(10 ** 30), "9" * 5000):
        answer = _events(server, f"limit={limit}")
        assert (len(answer["events"]), answer["more"]) == (EVENTS_CAP, True), limit
        status, hits = _get(server, f"/api/search?q=question&limit={limit}")
        assert (status, len(hits)) == (200, SEARCH_CAP), limit
        status, rows = _get(server, f"/api/sessions?limit={limit}")
        assert (status, len(rows)) == (200, 2), limit  # the sessions have no cap


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(-5, 3 * EVENTS_CAP), after=st.integers(-3, EVENTS + 3))
def test_a_limit_is_how_many_up_to_the_cap(server: ViewServer, limit: int,
                                           after: int) -> None:
    path = f"/api/session/long/events?after={after}&limit={limit}"
    status, answer = _get(server, path)
    if limit < 1:
        assert status == 400, f"{len(answer['events'])} events"
        return
    left = max(EVENTS - max(after + 1, 0), 0)
    assert status == 200
    assert len(answer["events"]) == min(limit, EVENTS_CAP, left)
    assert answer["more"] is (left > min(limit, EVENTS_CAP))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=8).filter(
    lambda t: not (t.isascii() and t.isdigit() and int(t) > 0)))
def test_any_other_limit_is_refused(server: ViewServer, text: str) -> None:
    quoted = urllib.parse.quote(text, safe="")
    for path in LIMITED:
        status, answer = _get(server, f"{path}limit={quoted}")
        assert status == 400, (path, text, answer)


def test_an_offset_is_a_count(server: ViewServer) -> None:
    for offset in ("-1", "abc", "+1", "1.0", "%201"):
        status, answer = _get(server, f"/api/sessions?offset={offset}")
        assert status == 400, (offset, answer)
        assert answer["error"].startswith("offset takes a whole number"), offset
    assert len(_get(server, "/api/sessions?offset=1")[1]) == 1
    assert _get(server, f"/api/sessions?offset={10 ** 30}") == (200, [])
    assert _get(server, f"/api/sessions?offset={'9' * 5000}") == (200, [])


def test_after_is_a_seq_on_both_routes(server: ViewServer) -> None:
    for route in ("events", "follow"):
        for after in ("abc", "+1", "1.0", "%201", "--1", "1_0"):
            status, answer = _get(server, f"/api/session/long/{route}?after={after}")
            assert status == 400, (route, after, answer)
            assert answer["error"].startswith("after takes a seq"), (route, after)
    # The page asks for the event SEQ as after=SEQ-1&limit=1: the first is after=-1.
    assert _events(server, "after=-1&limit=1")["events"][0]["seq"] == 0
    assert _events(server, f"after=-{10 ** 30}&limit=1")["events"][0]["seq"] == 0
    assert _events(server, f"after={'9' * 5000}")["events"] == []
