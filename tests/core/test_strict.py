"""Issue 12: strict on write, lenient on read.

A strict append (the default) refuses, before anything changes, what a lenient reader
keeps verbatim as an opaque event: an event type no plugin declares, an unknown key, an
unknown member of a merge-extensible union; each error names the event type, the JSON
path, the plugin that registered the schema and the closest known name. The table below
lists the typos of the issue and more; each is also accepted by a lenient store (so the
reference's behaviour stays reachable) and named by ``validate --strict`` once logged.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import dsh_session_example.plugin
import msgspec
import pytest
from dsh_session_example.members import BudgetReason, StickerBlock
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_session_core import (
    OpaqueEvent,
    Session,
    SessionStore,
    UnionMember,
    create_plugin_manager,
    hookimpl,
)
from dsh_session_core.errors import (
    AppendError,
    DuplicateUnionMemberError,
    InvariantError,
    PluginError,
    SchemaError,
    UnknownEventTypeError,
    UnknownFieldError,
    UnknownMemberError,
)

USER = {"kind": "user"}
START = {"turn": 1, "trigger": {"kind": "message", "source": USER}}
SURFACE = {"surface_op": "append"}
NONE: dict[str, Any] = {}


def _result(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"turn": 1, "step": 1, "callId": "c1",
                            "content": [{"type": "text", "text": "ok"}], "isError": False}
    data.update(extra)
    return data


def _assistant(block: dict[str, Any]) -> dict[str, Any]:
    return {"turn": 1, "step": 1, "content": [block]}


# (label, type, data, append kwargs, error class, path, suggestion)
TYPOS: list[tuple[str, str, dict[str, Any], dict[str, Any], type[Exception], str | None,
                  str | None]] = [
    ("tool_call for tool-call", "assistant/message",
     _assistant({"type": "tool_call", "id": "c1", "name": "ls", "arguments": "{}"}), SURFACE,
     UnknownMemberError, "$.content[0].type", "tool-call"),
    ("toolName on tool/result", "tool/result", _result(toolName="ls"), SURFACE,
     UnknownFieldError, "$", None),
    ("isErorr for isError", "tool/result",
     {k: v for k, v in _result(isErorr=False).items() if k != "isError"}, SURFACE,
     UnknownFieldError, "$", "isError"),
    ("wrong key case CallId", "tool/result",
     {("CallId" if k == "callId" else k): v for k, v in _result().items()}, SURFACE,
     UnknownFieldError, "$", "callId"),
    ("snake_case call_id", "tool/call",
     {"turn": 1, "step": 1, "call_id": "c1", "name": "ls", "arguments": "{}"}, NONE,
     UnknownFieldError, "$", "callId"),
    ("unknown chunk kind text_delta", "assistant/chunk",
     {"turn": 1, "step": 1, "chunk": {"type": "text_delta", "index": 0, "text": "x"}}, NONE,
     UnknownMemberError, "$.chunk.type", "text-delta"),
    ("a finish reason as a turn-end reason", "turn/end",
     {"turn": 1, "reason": {"kind": "stop"}}, NONE, UnknownMemberError, "$.reason.kind", None),
    ("a misspelt turn-end reason", "turn/end",
     {"turn": 1, "reason": {"kind": "complete"}}, NONE,
     UnknownMemberError, "$.reason.kind", "completed"),
    ("a misspelt trigger", "turn/start",
     {"turn": 1, "trigger": {"kind": "mesage", "source": USER}}, NONE,
     UnknownMemberError, "$.trigger.kind", "message"),
    ("a misspelt message source", "user/message",
     {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "usr"}}, SURFACE,
     UnknownMemberError, "$.source.kind", "user"),
    ("a block without its type", "user/message",
     {"content": [{"text": "hi"}], "source": USER}, SURFACE, SchemaError, "$.content[0]", None),
    ("a missing required field", "tool/call",
     {"turn": 1, "step": 1, "callId": "c1", "arguments": "{}"}, NONE, SchemaError, "$", None),
    ("an unknown key in a nested block", "assistant/message",
     _assistant({"type": "text", "text": "hi", "cache": True}), SURFACE,
     UnknownFieldError, "$.content[0]", None),
    ("camelCase usage key in snake case", "assistant/message",
     {"turn": 1, "step": 1, "content": [], "usage": {"input_tokens": 1, "outputTokens": 2}},
     SURFACE, UnknownFieldError, "$.usage", "inputTokens"),
    ("a misspelt event type", "tool/reslt", _result(), NONE, UnknownEventTypeError, None,
     "tool/result"),
    ("a type from nowhere", "acme/trace", {"span": 1}, NONE, UnknownEventTypeError, None, None),
    ("a tool-result block misspelt inside content", "user/message",
     {"content": [{"type": "tool-reslt", "toolCallId": "c", "content": []}], "source": USER},
     SURFACE, UnknownMemberError, "$.content[0].type", "tool-result"),
]


@pytest.mark.parametrize(("label", "etype", "data", "kw", "error", "path", "suggestion"), TYPOS,
                         ids=[t[0] for t in TYPOS])
def test_each_typo_is_refused_at_append_with_the_named_error_and_the_log_untouched(
    label: str, etype: str, data: dict[str, Any], kw: dict[str, Any], error: type[Exception],
    path: str | None, suggestion: str | None,
) -> None:
    s = Session("strict")
    s.append("turn/start", START)
    s.append("step/start", {"turn": 1, "step": 1})
    before = (s.seq, s.to_jsonl())
    with pytest.raises(error) as info:
        s.append(etype, data, **kw)
    exc = info.value
    assert (s.seq, s.to_jsonl()) == before
    assert isinstance(exc, AppendError)
    assert exc.event_type == etype
    assert exc.seq == 2
    assert etype in str(exc)
    if path is not None:
        assert isinstance(exc, SchemaError)
        assert exc.path == path
        assert exc.plugin == "core"
        assert f"at {path} of {etype}" in str(exc)
    if suggestion is not None:
        assert exc.suggestion == suggestion  # type: ignore[attr-defined]
        assert f'did you mean "{suggestion}"?' in str(exc)


def test_the_issue_wording_of_an_unknown_key_and_an_unknown_block_kind() -> None:
    s = Session("wording")
    with pytest.raises(UnknownFieldError,
                       match=r'unknown key "isErorr" at \$ of tool/result; did you mean '
                             r'"isError"\?'):
        s.append("tool/result", {k: v for k, v in _result(isErorr=True).items()
                                 if k != "isError"}, surface_op="append")
    with pytest.raises(UnknownMemberError,
                       match=r'unknown content block kind "tool_call" .*did you mean '
                             r'"tool-call"\?'):
        s.append("assistant/message", _assistant(
            {"type": "tool_call", "id": "c", "name": "n", "arguments": "{}"}), surface_op="append")


def test_a_reason_from_another_map_says_which_map_it_belongs_to() -> None:
    with pytest.raises(UnknownMemberError, match='"stop" is a finish reason'):
        Session("maps").append("turn/end", {"turn": 1, "reason": {"kind": "stop"}})


#: The typos a lenient reader keeps verbatim (the others also miss a required field, which
#: the reference refuses too: a strict append names the unknown key instead).
KEPT = [t for t in TYPOS if t[4] is not SchemaError and t[0] not in {
    "isErorr for isError", "wrong key case CallId", "snake_case call_id",
    "camelCase usage key in snake case"}]


@pytest.mark.parametrize(("label", "etype", "data", "kw", "error", "path", "suggestion"), KEPT,
                         ids=[t[0] for t in KEPT])
def test_a_lenient_session_keeps_each_verbatim_and_validate_strict_names_it(
    tmp_path: Path, label: str, etype: str, data: dict[str, Any], kw: dict[str, Any],
    error: type[Exception], path: str | None, suggestion: str | None,
) -> None:
    s = Session("lenient", strict=False)
    s.append("turn/start", START)
    event = s.append(etype, data, **kw)
    assert type(event) is OpaqueEvent
    assert msgspec.json.decode(s.jsonl().splitlines()[-1])["data"] == data  # verbatim
    log = tmp_path / "lenient.jsonl"
    log.write_bytes(s.to_jsonl())  # the header line, then the events
    proc = _cli("validate", "--strict", str(log))
    assert proc.returncode == 1
    if path is not None:
        assert "loaded opaquely: " in proc.stdout
        assert f"at $.data{path[1:]}" in proc.stdout
    else:
        assert "no installed plugin declares it" in proc.stdout
    assert _cli("validate", str(log)).returncode == 0  # lenient: valid, as the reference


def test_foreign_types_let_chosen_types_through_a_strict_store() -> None:
    store = SessionStore(create_plugin_manager(autoload=False),
                         foreign_types=["myharness/*"])
    s = store.create("h")
    assert s.strict
    s.append("myharness/trace", {"span": 1})
    s.append("myharness/trace", {"span": 2, "anything": [1, {"goes": True}]})
    with pytest.raises(UnknownEventTypeError):
        s.append("other/trace", {})
    assert [e.type for e in s.events] == ["myharness/trace", "myharness/trace"]


# --- plugins extend the unions ------------------------------------------------------------


def _example_store(**kw: Any) -> SessionStore:
    pm = create_plugin_manager(autoload=False)
    pm.register(dsh_session_example.plugin, name="example")
    return SessionStore(pm, **kw)


PLUGIN_TURN: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("turn/start", {"turn": 1, "trigger": {"kind": "example-schedule", "cron": "0 * * * *"}},
     NONE),
    ("user/message", {"content": [{"type": "example-sticker", "name": "cat"}],
                      "source": {"kind": "example-webhook", "url": "https://x.test/h"}},
     SURFACE),
    ("step/start", {"turn": 1, "step": 1}, NONE),
    ("assistant/chunk", {"turn": 1, "step": 1,
                         "chunk": {"type": "example-progress", "percent": 40}}, NONE),
    ("step/end", {"turn": 1, "step": 1}, NONE),
    ("turn/end", {"turn": 1, "reason": {"kind": "example-budget", "spent": 900}}, NONE),
]


def test_with_the_plugin_its_members_validate_and_are_listed_with_their_owner() -> None:
    store = _example_store()
    members = {(m.family, m.tag): m.plugin for m in store.registry.members}
    assert members[("content-block", "example-sticker")] == "example"
    assert members[("turn-end-reason", "example-budget")] == "example"
    assert members[("content-block", "text")] == "core"
    s = store.create("plugin-members")
    for etype, data, kw in PLUGIN_TURN:
        s.append(etype, data, **kw)
    # Strict still checks inside a plugin's member.
    with pytest.raises(UnknownFieldError, match='did you mean "name"'):
        s.append("user/message", {"content": [{"type": "example-sticker", "nam": "x"}],
                                  "source": USER}, surface_op="append")
    with pytest.raises(SchemaError, match=r"expected an integer.*\$\.reason\.spent"):
        s.append("turn/end", {"turn": 1, "reason": {"kind": "example-budget", "spent": "x"}})
    assert s.seq == len(PLUGIN_TURN)


def test_without_the_plugin_they_load_opaquely_and_validate_strict_names_them(
    tmp_path: Path
) -> None:
    s = _example_store().create("written-with-the-plugin")
    for etype, data, kw in PLUGIN_TURN:
        s.append(etype, data, **kw)
    log = tmp_path / "members.jsonl"
    log.write_bytes(s.to_jsonl())
    with_plugin = _cli("validate", "--strict", str(log))
    assert with_plugin.returncode == 0, with_plugin.stdout
    without = _cli("validate", "--strict", str(log), env={"DSH_SESSION_DISABLE_PLUGINS": "example"})
    assert without.returncode == 1
    for named in ('unknown turn trigger "example-schedule" at $.data.trigger.kind',
                  'unknown content block kind "example-sticker" at $.data.content[0].type',
                  'unknown stream chunk kind "example-progress" at $.data.chunk.type',
                  'unknown turn end reason "example-budget" at $.data.reason.kind'):
        assert named in without.stdout, without.stdout
    # Lenient reading is unchanged: the log derives, and round-trips byte for byte.
    export = _cli("export", str(log), env={"DSH_SESSION_DISABLE_PLUGINS": "example"})
    assert export.stdout.encode() == log.read_bytes()


def test_a_member_claimed_twice_fails_naming_both_owners() -> None:
    class Rival:
        @hookimpl
        def register_union_members(self) -> list[UnionMember]:
            return [UnionMember("turn-end-reason", BudgetReason)]

    pm = create_plugin_manager(autoload=False)
    pm.register(dsh_session_example.plugin, name="example")
    pm.register(Rival(), name="rival")
    with pytest.raises(DuplicateUnionMemberError) as info:
        SessionStore(pm)
    assert info.value.plugins == ("example", "rival")
    assert info.value.family == "turn-end-reason"
    assert info.value.tag == "example-budget"
    assert "'example'" in str(info.value)
    assert "'rival'" in str(info.value)


def test_a_member_clashing_with_core_names_core() -> None:
    class Text(msgspec.Struct, tag_field="type", tag="text"):
        """Not core's text."""

        body: str

    class Clash:
        @hookimpl
        def register_union_members(self) -> list[UnionMember]:
            return [UnionMember("content-block", Text)]

    pm = create_plugin_manager(autoload=False)
    pm.register(Clash(), name="clash")
    with pytest.raises(DuplicateUnionMemberError, match="both core and plugin 'clash'"):
        SessionStore(pm)


@pytest.mark.parametrize(("member", "says"), [
    (UnionMember("content-blocks", StickerBlock), "unknown union 'content-blocks'"),
    (UnionMember("turn-end-reason", StickerBlock), "must be tagged on 'kind'"),
    (UnionMember("content-block", dict), "must be a msgspec Struct"),  # type: ignore[arg-type]
    ("not a member", "must return UnionMember entries"),
])
def test_a_malformed_member_is_a_plugin_error_saying_what_to_fix(member: Any, says: str) -> None:
    class Bad:
        @hookimpl
        def register_union_members(self) -> list[Any]:
            return [member]

    pm = create_plugin_manager(autoload=False)
    pm.register(Bad(), name="bad")
    with pytest.raises(PluginError, match=says):
        SessionStore(pm)


def test_a_registry_is_frozen_after_its_build() -> None:
    pm = create_plugin_manager(autoload=False)
    store = SessionStore(pm)
    pm.register(dsh_session_example.plugin, name="example")
    assert store.registry.members.get("content-block", "example-sticker") is None
    with pytest.raises(UnknownMemberError):
        store.create("frozen").append("user/message", PLUGIN_TURN[1][1], surface_op="append")


def test_events_lists_the_members_with_their_owners_in_every_format() -> None:
    text = _cli("events").stdout
    assert "content-block    example-sticker  example" in text
    rows = msgspec.json.decode(_cli("events", "--json").stdout)["unions"]
    assert {"union": "turn-end-reason", "tag": "example-budget", "plugin": "example"}.items() \
        <= next(r for r in rows if r["tag"] == "example-budget").items()
    schema = msgspec.json.decode(_cli("events", "--schema").stdout)
    sticker = schema["unions"]["content-block"]["example-sticker"]
    assert sticker["plugin"] == "example"
    assert schema["$defs"]["StickerBlock"]["required"] == ["type", "name"]
    markdown = _cli("events", "--markdown").stdout
    assert "| `example-sticker` | `{ name: string }` | `example` |" in markdown


# --- the opt-in structural checks ---------------------------------------------------------


def test_checks_refuse_an_unpaired_tool_result_before_it_is_logged() -> None:
    s = SessionStore(create_plugin_manager(autoload=False), checks=True).create("checked")
    s.append("turn/start", START)
    s.append("step/start", {"turn": 1, "step": 1})
    before = s.to_jsonl()
    with pytest.raises(InvariantError):
        s.append("tool/result", _result(callId="never-called"), surface_op="append")
    assert s.to_jsonl() == before
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "ls",
                           "arguments": "{}"})
    s.append("tool/result", _result(), surface_op="append")  # answers its call
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    with pytest.raises(InvariantError):
        s.append("step/start", {"turn": 1, "step": 2})  # outside any open turn
    assert s.seq == 6


def test_without_checks_the_same_unpaired_result_is_accepted() -> None:
    s = SessionStore(create_plugin_manager(autoload=False)).create("unchecked")
    s.append("turn/start", START)
    s.append("tool/result", _result(callId="never-called"), surface_op="append")
    assert s.seq == 2


# --- any input: refused with a DshSessionError, or accepted typed or as a plugin member ---

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["type", "kind", "text", "name", "x", "callId"]),
                      inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(etype=st.sampled_from(["user/message", "assistant/message", "tool/result", "turn/end",
                              "assistant/chunk", "turn/start"]),
       data=st.dictionaries(st.sampled_from(["turn", "step", "content", "reason", "chunk",
                                             "trigger", "source", "callId", "isError", "y"]),
                            _JSON, max_size=5))
def test_a_strict_append_either_refuses_or_logs_an_event_with_no_unknown_part(
    etype: str, data: dict[str, Any]
) -> None:
    from dsh_session_core.errors import DshSessionError

    s = _example_store().create("fuzz")
    kw = SURFACE if etype in ("user/message", "assistant/message", "tool/result") else NONE
    try:
        event = s.append(etype, data, **kw)
    except DshSessionError:
        assert s.seq == 0
        return
    lenient = Session("same", strict=False)
    assert type(lenient.append(etype, data, **kw)) is type(event)
    if type(event) is OpaqueEvent:  # only a plugin's member can make a strict event opaque
        assert any(tag in s.to_jsonl().decode() for tag in (
            "example-sticker", "example-progress", "example-schedule", "example-budget",
            "example-webhook"))


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "dsh_session_core", *argv],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})


def test_every_strict_error_is_a_schema_or_type_error_callers_already_catch() -> None:
    assert issubclass(UnknownFieldError, SchemaError)
    assert issubclass(UnknownMemberError, SchemaError)
    from dsh_session_core.errors import EventTypeError

    assert issubclass(UnknownEventTypeError, EventTypeError)


def test_a_bare_session_names_an_installed_plugin_it_does_not_hold() -> None:
    # A bare Session knows core's types only: the todo plugin is installed in this test
    # environment, so the fix is a store's registry, not an install.
    with pytest.raises(UnknownEventTypeError,
                       match=r"its plugin \(dsh-session-todo\) is installed, but this "
                             r"session's registry does not hold it"):
        Session("bare").append("todo/write", {"todos": []})
    store_session = SessionStore().create("from-a-store")
    store_session.append("turn/start", START)
    assert store_session.append("todo/write", {"todos": []}).type == "todo/write"


# --- a wrong type is no unknown part: strict=False would not help (issue 24, point 4) --------


@pytest.mark.parametrize(("etype", "data", "says"), [
    ("user/message", {"content": 123, "source": USER}, "expected an array, got int"),
    ("user/message", {"content": [{"type": "text", "text": 5}], "source": USER},
     "expected a string, got int"),
    ("tool/result", _result(isError="no"), "expected true or false, got str"),
    ("tool/result", {"turn": 1, "step": 1, "callId": "c1", "isError": False},
     "content"),
])
def test_a_wrong_type_or_a_missing_field_does_not_suggest_strict_false(
    etype: str, data: dict[str, Any], says: str,
) -> None:
    strict = Session("s")
    strict.append("turn/start", START)
    with pytest.raises(SchemaError) as info:
        strict.append(etype, data, surface_op="append")
    message = str(info.value)
    assert says in message
    assert "strict=False" in message  # named, as what would not help...
    assert "refuses it too" in message  # ...not suggested
    assert "open the store with strict=False" not in message
    assert strict.seq == 1
    lenient = Session("l", strict=False)  # and indeed it refuses it too
    lenient.append("turn/start", START)
    with pytest.raises(SchemaError):
        lenient.append(etype, data, surface_op="append")


def test_an_unknown_key_still_suggests_strict_false() -> None:
    s = Session("s")
    s.append("turn/start", START)
    with pytest.raises(UnknownFieldError, match="open the store with strict=False"):
        s.append("tool/result", _result(isErorr=True), surface_op="append")
