"""Hypothesis strategies of derived messages for the ``to_*`` conversion tests: every
block kind core knows, in every position, plus untyped blocks (an unknown kind, a
reasoning block carrying a provider signature) as a log keeps them verbatim."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

from dsh_session_core import vocabulary as v

__all__ = ["histories", "messages"]

_text = st.text(max_size=12)
_ids = st.sampled_from(["c1", "c2", "call_3"])
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3),
                     max_leaves=6)
_arguments = st.one_of(st.dictionaries(_text, _json, max_size=3).map(json.dumps),
                       _text, st.just(""), st.just("[1, 2]"))
_images = st.one_of(
    st.builds(lambda mt, raw: v.ImageBlock(media_type=mt, data=base64.b64encode(raw).decode()),
              st.sampled_from(["image/png", "image/jpeg", "image/svg+xml"]),
              st.binary(max_size=8)),
    st.builds(lambda mt: v.ImageBlock(media_type=mt, url="https://example.com/a.png"),
              st.sampled_from(["image/png", "image/webp"])),
)
_untyped: st.SearchStrategy[Any] = st.one_of(
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _text}),
    st.fixed_dictionaries({"type": st.just("reasoning"), "text": _text,
                           "signature": st.just("sig-abc")}),
    st.fixed_dictionaries({"type": st.just("reasoning"), "text": st.just(""),
                           "redactedData": st.just("opaque-data")}),
)
_leaf = st.one_of(
    st.builds(v.TextBlock, text=_text),
    st.builds(v.ReasoningBlock, text=_text),
    st.builds(v.ToolCallBlock, id=_ids, name=st.sampled_from(["bash", "read"]),
              arguments=_arguments),
    _images,
    _untyped,
)
_result = st.builds(
    lambda call_id, content, err: v.ToolResultBlock(tool_call_id=call_id, content=tuple(content),
                                                  is_error=err),
    _ids, st.lists(_leaf, max_size=3), st.sampled_from([True, False]))
_block = st.one_of(_leaf, _result)

messages = st.builds(
    lambda role, content: v.Message(role=role, content=tuple(content)),
    st.sampled_from(["system", "user", "user", "assistant", "assistant"]),
    st.lists(_block, max_size=4),
)
#: Derived histories of up to 8 messages, any block anywhere.
histories = st.lists(messages, max_size=8)
