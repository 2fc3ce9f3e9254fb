"""Hostile input to ``append`` and to the readers (issue 11, defects 3, 4 and 5).

Every input to ``Session.append`` either succeeds or raises a ``DshSessionError``
subclass with the log untouched; data nesting deeper than ``MAX_JSON_DEPTH`` is refused
at append with the path of the first container past the limit, and every reader meets a
deeper line with a ``LogFormatError`` (or cuts it, in a torn tail), never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_session_core import MAX_JSON_DEPTH, JsonObject, ReplaceOp, Session, open_store
from dsh_session_core._logformat.logfile import line_wire, parse_log, read_lenient, scan_log
from dsh_session_core.errors import (
    DshSessionError,
    EventTypeError,
    LogFormatError,
    NotJsonError,
    SurfaceIntentError,
    TooDeepError,
)

TS = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
TE = {"turn": 1, "reason": {"kind": "completed"}}
U = {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}


def _tr(meta: Any) -> dict[str, Any]:
    return {"turn": 1, "step": 1, "callId": "c1", "content": [{"type": "text", "text": "x"}],
            "isError": False, "meta": meta}


def nested(levels: int, leaf: Any = 1) -> Any:
    """``levels`` arrays and objects, alternating, around ``leaf``."""
    v = leaf
    for i in range(levels):
        v = [v] if i % 2 else {"k": v}
    return v


def _session(**kw: Any) -> Session:
    """A session in an open turn (``kw``: ``strict=False``, ``foreign_types``)."""
    s = Session("s", **kw)
    s.append("turn/start", TS)
    s.append("user/message", U, surface_op="append")
    return s


def _refused(s: Session, exc_type: type[DshSessionError], *args: Any, **kw: Any
             ) -> DshSessionError:
    """Append must raise ``exc_type`` and leave the log exactly as it was."""
    before, lines, seq = list(s.events), s.jsonl(), s.seq
    with pytest.raises(exc_type) as info:
        s.append(*args, **kw)
    assert list(s.events) == before
    assert s.jsonl() == lines
    assert s.seq == seq
    return info.value


# --- defect 3: deep JSON, at append -------------------------------------------------------


def test_meta_at_the_depth_limit_is_accepted_and_one_deeper_is_refused() -> None:
    s = _session()
    # data is level 1, meta's value level 2: MAX_JSON_DEPTH - 1 levels fit in meta.
    s.append("tool/result", _tr(nested(MAX_JSON_DEPTH - 1)), surface_op="append")
    exc = _refused(s, TooDeepError, "tool/result", _tr(nested(MAX_JSON_DEPTH)),
                   surface_op="append")
    assert isinstance(exc, TooDeepError)
    assert isinstance(exc, NotJsonError)  # what an older caller already catches
    assert exc.limit == MAX_JSON_DEPTH
    assert exc.event_type == "tool/result"
    assert exc.seq == 3
    # The first container past the limit: meta, then 127 alternating levels.
    assert exc.path.startswith("$.meta[0].k[0].k")
    assert exc.path.count(".k") + exc.path.count("[0]") == MAX_JSON_DEPTH - 1
    assert str(MAX_JSON_DEPTH) in str(exc)
    assert "flatten" in str(exc)


@pytest.mark.parametrize("levels", [1000, 5000])
def test_very_deep_meta_is_refused_not_a_recursion_error(levels: int) -> None:
    # Was RecursionError from the freeze/thaw helpers (and a log no process could open).
    _refused(_session(), TooDeepError, "tool/result", _tr(nested(levels)),
             surface_op="append")


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 1000])
def test_deep_data_of_an_unknown_type_is_refused(levels: int) -> None:
    s = _session(foreign_types=["x/y"])
    s.append("x/y", nested(MAX_JSON_DEPTH))
    exc = _refused(s, TooDeepError, "x/y", nested(levels))
    assert isinstance(exc, TooDeepError)
    assert exc.path.count(".k") + exc.path.count("[0]") == MAX_JSON_DEPTH


def _blocks(levels: int) -> dict[str, Any]:
    """A user/message whose content nests ``levels`` tool-result blocks (a typed schema
    that nests: no Any field involved)."""
    content: list[Any] = [{"type": "text", "text": "x"}]
    for _ in range(levels):
        content = [{"type": "tool-result", "toolCallId": "c", "content": content}]
    return {"content": content, "source": {"kind": "user"}}


def test_typed_blocks_nesting_past_the_limit_are_refused() -> None:
    s = _session()
    # content is level 2, each block two levels more (its object, its content array).
    s.append("user/message", _blocks((MAX_JSON_DEPTH - 3) // 2), surface_op="append")
    exc = _refused(s, TooDeepError, "user/message", _blocks(MAX_JSON_DEPTH // 2),
                   surface_op="append")
    assert isinstance(exc, TooDeepError)
    assert exc.path.startswith("$.content[0].content[0]")


def test_deep_data_as_a_struct_is_refused() -> None:
    from dsh_session_core.events import ToolResultData

    s = _session()
    payload = msgspec.convert(_tr(nested(MAX_JSON_DEPTH)), ToolResultData)
    _refused(s, TooDeepError, "tool/result", payload, surface_op="append")


_RELOAD = """
import sys
from dsh_session_core import open_store
with open_store(sys.argv[1]) as store:
    sys.stdout.buffer.write(store.open("deep").jsonl())
"""


def test_data_at_the_limit_flushes_and_reloads_in_a_fresh_process(tmp_path: Path) -> None:
    # Was: 495 levels accepted and flushed, and a fresh process could not open the log.
    for url in (str(tmp_path / "logs"), f"sqlite:///{tmp_path}/s.db"):
        with open_store(url, foreign_types=["x/y"]) as store:
            s = store.create("deep", cwd="/x")
            s.append("turn/start", TS)
            s.append("tool/result", _tr(nested(MAX_JSON_DEPTH - 1)), surface_op="append")
            s.append("x/y", nested(MAX_JSON_DEPTH))
            s.append("user/message", _blocks((MAX_JSON_DEPTH - 3) // 2), surface_op="append")
            s.append("turn/end", TE)
            store.flush(s)
            expected = s.jsonl()
        out = subprocess.run([sys.executable, "-c", _RELOAD, url], capture_output=True,
                             check=True)
        assert out.stdout == expected


# --- defect 3: deep JSON, in the readers --------------------------------------------------


def _log(tmp_path: Path) -> tuple[str, str, bytes]:
    root = str(tmp_path / "logs")
    with open_store(root) as store:
        s = store.create("deep", cwd="/x")
        s.append("turn/start", TS)
        s.append("turn/end", TE)
        store.flush(s)
        path = store.location("deep")
    with open(path, "rb") as f:
        return root, path, f.read()


def _deep_line(levels: int, typed: bool) -> bytes:
    meta = b"[" * levels + b"]" * levels
    if typed:
        return (b'{"type":"tool/result","seq":2,"time":1,"data":{"turn":1,"step":1,'
                b'"callId":"c","content":[{"type":"text","text":"x"}],"isError":false,'
                b'"meta":' + meta + b'},"surfaceOp":"append"}\n')
    return b'{"type":"x/y","seq":2,"time":1,"data":' + meta + b"}\n"


_TURN_END = (b'{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,'
             b'"reason":{"kind":"completed"}}}\n')
DEEP = [(MAX_JSON_DEPTH, True), (MAX_JSON_DEPTH + 1, False), (1000, True), (1000, False),
        (100_000, False)]


@pytest.mark.parametrize(("levels", "typed"), DEEP)
def test_a_deep_line_in_the_torn_tail_is_cut(tmp_path: Path, levels: int, typed: bool
                                            ) -> None:
    root, path, base = _log(tmp_path)
    registry = open_store("memory:").registry
    data = base + _deep_line(levels, typed)
    scan = scan_log(data, registry)
    assert len(scan.events) == 2
    assert scan.committed_bytes == len(base)
    lenient = read_lenient(data, registry)
    assert lenient.skipped == [(4, "too deep")]
    with pytest.raises(LogFormatError, match=r"line 4: nests arrays and objects deeper"):
        parse_log(data, registry)
    with open(path, "wb") as f:
        f.write(data)
    with open_store(root) as store:
        assert len(store.open("deep").events) == 2  # was RecursionError
    with open(path, "rb") as f:
        assert f.read() == base  # cut, like any torn tail


@pytest.mark.parametrize(("levels", "typed"), DEEP)
def test_a_deep_committed_line_is_a_log_format_error(tmp_path: Path, levels: int,
                                                     typed: bool) -> None:
    root, path, base = _log(tmp_path)
    registry = open_store("memory:").registry
    data = base + _deep_line(levels, typed) + _TURN_END
    with pytest.raises(LogFormatError) as info:
        scan_log(data, registry, path=path)
    assert info.value.line == 4
    assert info.value.path == path
    assert "unparsable committed event at line 3 (seq 2: it nests" in str(info.value)
    assert read_lenient(data, registry).skipped == [(4, "too deep")]
    with open(path, "wb") as f:
        f.write(data)
    with open_store(root) as store, pytest.raises(LogFormatError, match="line 3"):
        store.open("deep")


def test_the_line_just_inside_the_limit_is_read(tmp_path: Path) -> None:
    _, _, base = _log(tmp_path)
    registry = open_store("memory:").registry
    for typed in (True, False):
        data = base + _deep_line(MAX_JSON_DEPTH - 1, typed)
        assert len(scan_log(data, registry).events) == 3
        assert len(parse_log(data, registry).events) == 3


@pytest.mark.parametrize("levels", [1000, 100_000])
def test_a_deep_header_or_line_is_no_traceback(levels: int) -> None:
    registry = open_store("memory:").registry
    deep = b"[" * levels + b"]" * levels
    header = b'{"type":"session","version":0,"id":"s","createdAt":1,"x":' + deep + b"}\n"
    for read in (scan_log, parse_log, read_lenient):
        with pytest.raises(LogFormatError) as info:
            read(header, registry)
        assert info.value.line == 1
    assert line_wire(deep) is None


_CLI = [["derive", "{path}"], ["validate", "{path}"], ["export", "{path}"],
        ["repair", "--dry-run", "{path}"], ["show", "--store", "{root}", "deep"],
        ["stats", "--store", "{root}", "deep"], ["ls", "--store", "{root}"],
        ["derive", "--recover", "{path}"]]


@pytest.mark.parametrize("committed", [False, True])
def test_no_cli_command_shows_a_traceback_on_a_deep_log(tmp_path: Path, committed: bool
                                                      ) -> None:
    root, path, base = _log(tmp_path)
    with open(path, "wb") as f:
        f.write(base + _deep_line(100_000, True) + (_TURN_END if committed else b""))
    exe = os.path.join(os.path.dirname(sys.executable), "dsh-session")
    for args in _CLI:
        argv = [a.format(path=path, root=root) for a in args]
        r = subprocess.run([exe, *argv], capture_output=True, text=True, check=False)
        assert "Traceback" not in r.stderr, (argv, r.stderr)
        assert "RecursionError" not in r.stderr + r.stdout, argv
        assert r.returncode in (0, 1), (argv, r.stderr)


# --- defect 4: lone surrogates ------------------------------------------------------------

SURROGATE_CASES = [
    ("user/message", dict(U, **{"\ud800": 1})),  # an extension key
    ("user/message", {"content": [{"type": "text", "text": "a\udfffb"}],
                      "source": {"kind": "user"}}),
    ("user/message", {"content": [{"type": "\ud800", "x": 1}], "source": {"kind": "user"}}),
    ("user/message", {"content": [{"type": "text", "text": "x", "\ud800": "\udc00"}],
                      "source": {"kind": "\ud800"}}),
    ("x/y", {"\ud800": "\udfff"}),
    ("x/y", "\ud800"),
    ("\ud800/x", {"a": 1}),
    ("request/header", {"\ud800": 1}),
    ("tool/result", _tr({"\ud800": ["\udc00"]})),
]


@pytest.mark.parametrize(("etype", "data"), SURROGATE_CASES)
def test_lone_surrogates_are_accepted_and_written_escaped(etype: str, data: Any) -> None:
    # Was UnicodeEncodeError from msgspec.convert (a key) and from schema_problem.
    s = _session()
    op: Any = "append" if etype in ("user/message", "tool/result") else None
    try:
        ev = s.append(etype, data, surface_op=op)
    except DshSessionError:
        assert s.seq == 2
        return
    line = s.jsonl(ev.seq)
    assert b"\\ud" in line  # escaped, as the reference writes it
    reloaded = Session("s", parse_log(b'{"type":"session","version":0,"id":"s","createdAt":1}\n'
                                      + s.jsonl(), s.registry).events)
    assert reloaded.jsonl() == s.jsonl()


@pytest.mark.parametrize("op", [{"op": "replace", "start": "\ud800", "end": 1}, "\ud800",
                                {"op": "\ud800", "start": 1, "end": 1}])
def test_a_surface_op_with_a_lone_surrogate_is_refused(op: Any) -> None:
    # Was UnicodeEncodeError from msgspec.convert.
    exc = _refused(_session(), SurfaceIntentError, "user/message", U, surface_op=op)
    assert "invalid surfaceOp" in str(exc)


# --- defect 5: undocumented exceptions ----------------------------------------------------


@pytest.mark.parametrize("key", ["a`b", "`", "a - at `$.x`", "a.b", "a[0]", "[0]", ".", ""])
def test_odd_extension_keys_are_kept(key: str) -> None:
    # A backtick was KeyError in schema_problem (it parsed msgspec's message text).
    s = _session(strict=False)
    ev = s.append("user/message", dict(U, **{key: {"c": 1}}), surface_op="append")
    assert ev.data[key] == {"c": 1}
    nested_key = {"content": [{"type": "text", "text": "x", key: 1}],
                  "source": {"kind": "user", key: [1]}}
    s.append("user/message", nested_key, surface_op="append")
    # The strict default refuses the same key, naming it (no KeyError either).
    from dsh_session_core.errors import UnknownFieldError

    exc = _refused(_session(), UnknownFieldError, "user/message", dict(U, **{key: 1}),
                   surface_op="append")
    assert isinstance(exc, UnknownFieldError)
    assert exc.key == key


@pytest.mark.parametrize("key", ["a`b", "a.b", "x[0]"])
def test_a_schema_error_beside_an_odd_key_is_still_named(key: str) -> None:
    from dsh_session_core.errors import SchemaError

    bad = {"content": [{"type": "text", "text": 5, key: 1}], "source": {"kind": "user"}}
    exc = _refused(_session(strict=False), SchemaError, "user/message", bad,
                   surface_op="append")
    assert isinstance(exc, SchemaError)
    assert exc.path == "$.content[0].text"


@pytest.mark.parametrize("seqs", [5, True, 1.5, "ab", b"ab", {1: 2}, object()])
def test_source_event_seqs_that_are_no_list_are_refused(seqs: Any) -> None:
    # 5 and True were TypeError ('int' object is not iterable).
    exc = _refused(_session(), SurfaceIntentError, "user/message", U, surface_op="append",
                   source_event_seqs=seqs)
    assert "pass a list of integers" in str(exc)


@pytest.mark.parametrize("etype", [5, None, True, ("a", "b"), set(), ["user/message"], b"x/y"])
def test_an_event_type_that_is_no_string_is_refused(etype: Any) -> None:
    # set() and lists were TypeError (unhashable); 5 and None were logged as types.
    exc = _refused(_session(), EventTypeError, etype, {"a": 1})
    assert isinstance(exc, EventTypeError)
    assert exc.event_type == repr(etype)


_NOT_INTS: list[Any] = [True, 1.0, "1", None]


@pytest.mark.parametrize("op", [ReplaceOp(v, v) for v in _NOT_INTS])
def test_a_replace_op_struct_with_no_int_seqs_is_refused(op: ReplaceOp) -> None:
    # ReplaceOp(True, True) was accepted (True in {1}) and logged as "start":true.
    _refused(_session(), SurfaceIntentError, "user/message", U, surface_op=op)


def test_a_logged_replace_op_can_be_appended_again() -> None:
    s = _session(foreign_types=["x/y"])
    ev = s.append("x/y", {"op": {"op": "replace", "start": 1, "end": 1}})
    op = ev.data["op"]
    assert isinstance(op, JsonObject)
    s.append("user/message", U, surface_op=op)
    assert s.surface.seqs == (3,)


@pytest.mark.parametrize("where", ["surface_op", "source_event_seqs", "seq entry", "type",
                                   "replace start"])
def test_a_deep_value_anywhere_is_refused_with_a_short_message(where: str) -> None:
    # Found by the property test: the message's repr() of a 3000-deep surface op was a
    # RecursionError.
    deep = nested(3000)
    kw: dict[str, Any] = {"surface_op": "append"}
    etype: Any = "user/message"
    if where == "surface_op":
        kw["surface_op"] = deep
    elif where == "source_event_seqs":
        kw["source_event_seqs"] = {"k": deep}
    elif where == "seq entry":
        kw["source_event_seqs"] = [deep]
    elif where == "replace start":
        kw["surface_op"] = ReplaceOp(deep, 1)
    else:
        etype = deep
    expected = EventTypeError if where == "type" else SurfaceIntentError
    exc = _refused(_session(), expected, etype, U, **kw)
    assert len(str(exc)) < 400


def test_a_deep_non_string_key_is_refused_with_a_short_path() -> None:
    key: Any = ()
    for _ in range(5000):
        key = (key,)
    exc = _refused(_session(), NotJsonError, "x/y", {key: 1})
    assert isinstance(exc, NotJsonError)
    assert len(exc.path) < 100


@pytest.mark.parametrize("levels", [300, 600, 5000])
def test_typed_blocks_nested_far_past_the_limit_are_refused(levels: int) -> None:
    # 600 was RecursionError from msgspec.convert on the typed fast path.
    exc = _refused(_session(), TooDeepError, "user/message", _blocks(levels),
                   surface_op="append")
    assert isinstance(exc, TooDeepError)
    assert exc.path.startswith("$.content[0].content[0]")


def test_an_event_type_with_a_lone_surrogate_is_refused_on_every_store() -> None:
    """Issue 11, defect 4: such a type was accepted, and a SQLite store then failed the
    session's every later flush; it is refused at append, before anything changes."""
    from dsh_session_core import SessionStore
    from dsh_session_core.errors import EventTypeError

    session = SessionStore(foreign_types=["x/*"]).create("s")
    with pytest.raises(EventTypeError, match="holds a lone surrogate") as info:
        session.append("x/\ud800", {"a": 1})
    assert info.value.seq == 0
    assert list(session.events) == []
    session.append("x/ok", {"a": 1})  # the next append takes the seq the refused one did not
    assert [e.seq for e in session.events] == [0]
