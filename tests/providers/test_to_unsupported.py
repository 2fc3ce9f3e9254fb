"""What each target does with every block kind, in every position a derived message can
hold it: the table docs/providers.md states, checked.

- ``native``: the target's own part or item (no placeholder);
- ``placeholder``: a text part ``<block type="...">{the block's JSON}</block>``;
- ``omitted``: left out (reasoning the target takes no copy of);
- ``input-object``: Anthropic's ``tool_use`` input for arguments that are no JSON object,
  ``{"_arguments": <raw text>}``.

Every case but ``native`` raises :class:`UnsupportedContentError` with ``strict=True``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import (
    UnsupportedContentError,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    to_pydantic_ai,
)

BLOCKS: dict[str, Any] = {
    "text": v.TextBlock(text="t"),
    "reasoning": v.ReasoningBlock(text="r"),
    "reasoning+signature": v.ReasoningBlock(text="r", signature="s"),
    "reasoning+id": v.ReasoningBlock(text="r", id="rs_1", encrypted_content="e"),
    "tool-call": v.ToolCallBlock(id="c", name="n", arguments='{"a":1}'),
    "tool-call, arguments no object": v.ToolCallBlock(id="c", name="n", arguments="[1]"),
    "tool-result": v.ToolResultBlock(tool_call_id="c", content=(v.TextBlock(text="o"),),
                                   is_error=True),
    "image": v.ImageBlock(media_type="image/png", data="AAAA"),
    "image/svg+xml": v.ImageBlock(media_type="image/svg+xml", data="AAAA"),
    "unknown kind": {"type": "citation", "url": "u"},
}
P, N, OM = "placeholder", "native", "omitted"
# (role of the message, kind) -> handling; "in tool result" is a block nested in one.
TABLE: dict[str, dict[tuple[str, str], str]] = {
    "openai-chat": {
        ("user", "text"): N, ("user", "image"): N, ("user", "image/svg+xml"): N,
        ("user", "tool-result"): N, ("user", "reasoning"): P, ("user", "tool-call"): P,
        ("user", "unknown kind"): P,
        ("assistant", "text"): N, ("assistant", "tool-call"): N,
        ("assistant", "tool-call, arguments no object"): N,
        ("assistant", "reasoning"): OM, ("assistant", "reasoning+signature"): OM,
        ("assistant", "reasoning+id"): OM,
        ("assistant", "image"): P, ("assistant", "tool-result"): P,
        ("assistant", "unknown kind"): P,
        ("system", "text"): N, ("system", "image"): P,
        ("in tool result", "text"): N, ("in tool result", "image"): N,
        ("in tool result", "reasoning"): P, ("in tool result", "unknown kind"): P,
    },
    "openai-responses": {
        ("user", "text"): N, ("user", "image"): N, ("user", "tool-result"): N,
        ("user", "reasoning"): P, ("user", "tool-call"): P, ("user", "unknown kind"): P,
        ("assistant", "text"): N, ("assistant", "tool-call"): N,
        ("assistant", "reasoning"): OM, ("assistant", "reasoning+signature"): OM,
        ("assistant", "reasoning+id"): N,
        ("assistant", "image"): P, ("assistant", "tool-result"): P,
        ("assistant", "unknown kind"): P,
        ("system", "text"): N, ("system", "image"): P,
        ("in tool result", "text"): N, ("in tool result", "image"): N,
        ("in tool result", "reasoning"): P, ("in tool result", "unknown kind"): P,
    },
    "anthropic": {
        ("user", "text"): N, ("user", "image"): N, ("user", "image/svg+xml"): P,
        ("user", "tool-result"): N, ("user", "reasoning"): P, ("user", "tool-call"): P,
        ("user", "unknown kind"): P,
        ("assistant", "text"): N, ("assistant", "tool-call"): N,
        ("assistant", "tool-call, arguments no object"): "input-object",
        ("assistant", "reasoning"): OM, ("assistant", "reasoning+signature"): N,
        ("assistant", "reasoning+id"): OM,
        ("assistant", "image"): P, ("assistant", "tool-result"): P,
        ("assistant", "unknown kind"): P,
        ("system", "text"): N, ("system", "image"): P,
        ("in tool result", "text"): N, ("in tool result", "image"): N,
        ("in tool result", "image/svg+xml"): P, ("in tool result", "reasoning"): P,
        ("in tool result", "unknown kind"): P,
    },
    "pydantic-ai": {
        ("user", "text"): N, ("user", "image"): N, ("user", "tool-result"): N,
        ("user", "reasoning"): P, ("user", "tool-call"): P, ("user", "unknown kind"): P,
        ("assistant", "text"): N, ("assistant", "tool-call"): N,
        ("assistant", "reasoning"): N, ("assistant", "reasoning+signature"): N,
        ("assistant", "reasoning+id"): N,
        ("assistant", "image"): P, ("assistant", "tool-result"): P,
        ("assistant", "unknown kind"): P,
        ("system", "text"): N, ("system", "image"): P,
        ("in tool result", "text"): N, ("in tool result", "image"): N,
        ("in tool result", "reasoning"): P, ("in tool result", "unknown kind"): P,
    },
}


def _dump(value: Any) -> str:
    if isinstance(value, list) and value and hasattr(value[0], "parts"):
        return ModelMessagesTypeAdapter.dump_json(value).decode()
    return json.dumps(value)


CONVERT: dict[str, Callable[..., Any]] = {
    "openai-chat": to_openai_chat, "openai-responses": to_openai_responses,
    "anthropic": to_anthropic, "pydantic-ai": to_pydantic_ai,
}
CASES = [(t, r, k, h) for t, rows in TABLE.items() for (r, k), h in rows.items()]


def _history(role: str, kind: str) -> list[v.Message]:
    block = BLOCKS[kind]
    if role == "in tool result":
        block = v.ToolResultBlock(tool_call_id="c", content=(block,), is_error=False)
        role = "user"
    return [v.Message(role=role, content=(block,))]  # type: ignore[arg-type]


@pytest.mark.parametrize(("target", "role", "kind", "handling"), CASES,
                         ids=[f"{t}-{r}-{k}" for t, r, k, _ in CASES])
def test_every_block_kind_is_handled_as_stated(target: str, role: str, kind: str,
                                               handling: str) -> None:
    convert = CONVERT[target]
    out = _dump(convert(_history(role, kind)))
    if handling == P:
        assert '<block type=\\"' in out or '<block type="' in out, out
    else:
        assert "<block type=" not in out, out
    if handling == OM:
        assert out in ("[]", '{"messages": []}'), out
    if handling == "input-object":
        assert '"input": {"_arguments": "[1]"}' in out, out
    if handling == N:
        convert(_history(role, kind), strict=True)
    else:
        with pytest.raises(UnsupportedContentError) as info:
            convert(_history(role, kind), strict=True)
        assert info.value.target == target


def test_every_kind_is_listed_for_every_target() -> None:
    for target, rows in TABLE.items():
        optional = {"image/svg+xml", "reasoning+signature", "reasoning+id",
                    "tool-call, arguments no object"}
        assert {k for _, k in rows} | optional == set(BLOCKS), target
        assert {k for _, k in rows} >= set(BLOCKS) - optional
