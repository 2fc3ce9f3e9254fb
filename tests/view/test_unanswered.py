"""The viewer flags a tool call no ``tool/result`` answers (issue 24, point 3): in the
session document its API serves (the warnings, ``unanswered``, the call's line), on the
quick first page as on the whole document, for a log written here and for the
reference's log that has one (a crash cut it right after a ``tool/call``)."""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from server_support import running
from unanswered_support import CALL_ID, CALL_SEQ, unanswered_log

from dsh_session_core._cli.support import registry
from dsh_session_view import ViewServer, make_server

CRASH_CALL = "call_00_nleXELfnppSd9WhEQof34008"


@contextlib.contextmanager
def _serving(file: Path) -> Iterator[ViewServer]:
    server = make_server(registry(), file=str(file), host="127.0.0.1", port=0)
    with running(server) as served:
        yield served


def _get(server: ViewServer, path: str) -> Any:
    with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=30) as response:
        return json.loads(response.read())


def _flagged(doc: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    return [(item["seq"], item["type"], item["unanswered"])
            for block in doc["timeline"] for item in block["items"] if "unanswered" in item]


def test_the_document_flags_the_unanswered_call(tmp_path: Path) -> None:
    log = unanswered_log(tmp_path / "store")
    with _serving(log) as server:
        for query in ("", "?all=1&full=1"):  # the quick first page, then the whole
            doc = _get(server, "/api/session/lost" + query)
            assert doc["unanswered"] == [{"callId": CALL_ID, "name": "bash",
                                          "seq": CALL_SEQ, "messageSeq": 3,
                                          "openTurn": False}], query
            assert _flagged(doc) == [(CALL_SEQ, "tool/call", [CALL_ID])], query
            (warning,) = [w for w in doc["warnings"] if CALL_ID in w]
            assert f"seq {CALL_SEQ}" in warning
            assert "bash" in warning
            assert "no tool/result" in warning


def test_a_call_answered_in_a_later_block_is_not_flagged_on_the_quick_page(
    tmp_path: Path,
) -> None:
    """The quick first page is built from the log's first blocks; a result in a block
    past them still answers the call."""
    from dsh_session_core import open_store

    user = {"kind": "user"}
    call = {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": "{}"}
    with open_store(str(tmp_path / "store")) as store:
        s = store.create("late")
        a = s.append
        a("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": user}})
        a("step/start", {"turn": 1, "step": 1})
        a("assistant/message", {"turn": 1, "step": 1, "content": [
            {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}]},
            surface_op="append")
        a("tool/call", call)
        a("step/end", {"turn": 1, "step": 1})
        a("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        for _ in range(60):  # more blocks than a quick page holds
            with s.turn() as turn:
                turn.user("hi")
        with s.turn() as turn, turn.step() as step:  # the result, 61 blocks on
            a("tool/result", {"turn": turn.number, "step": step.number, "callId": "c1",
                              "content": [{"type": "text", "text": "late"}],
                              "isError": False}, surface_op="append")
        store.flush(s)
        log = Path(store.location("late"))
    with _serving(log) as server:
        quick = _get(server, "/api/session/late")
        assert quick.get("partial") is True  # the page is a prefix's
        assert quick["unanswered"] == []
        assert _flagged(quick) == []
        assert not any("no tool/result" in w for w in quick["warnings"])


def test_the_references_crashed_log_is_flagged(upstream: Path, tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    shutil.copy(upstream / "synthetic" / "crash-after-tool-call.jsonl", log)
    with _serving(log) as server:
        (row,) = _get(server, "/api/sessions")
        doc = _get(server, f"/api/session/{row['id']}?all=1&full=1")
        assert [(u["callId"], u["seq"], u["openTurn"]) for u in doc["unanswered"]] == [
            (CRASH_CALL, 59, True)]
        assert _flagged(doc) == [(59, "tool/call", [CRASH_CALL])]
        assert any(CRASH_CALL in w and "still open" in w for w in doc["warnings"])
