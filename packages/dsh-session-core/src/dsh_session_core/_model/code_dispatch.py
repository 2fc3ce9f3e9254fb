"""Recording Code Mode sub-dispatches: the ``tool/code-dispatch`` event.

A ``run_code`` program calls the registry's tools one at a time; each such sub-call is
logged (log-only: it never re-enters the model's context) with a deterministic id, the
exact JSON value it was given and a bounded summary of what it returned. The program
runtime and the tool registry are the harness's; this module only numbers the calls,
normalizes their arguments and writes the record::

    dispatcher = CodeDispatcher("call-7", session)
    sub = dispatcher.begin("bash", {"command": "ls"})   # raises before any dispatch
    result = run_tool(sub.sub_call_id, sub.name, sub.arguments)
    dispatcher.record(sub, result.content, is_error=result.is_error)
"""

from __future__ import annotations

__all__ = [
    "SUMMARY_MAX_CHARS",
    "CodeDispatcher",
    "SubDispatch",
    "ToolArgumentsError",
    "normalize_tool_arguments",
    "summarize_tool_result",
]

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from msgspec import UNSET, Struct

from ..errors import DshSessionError
from ..jscompat import utf16_len, utf16_prefix

if TYPE_CHECKING:
    from ..events import Event
    from ..vocabulary import ContentBlock
    from .session import Session

#: The bound on ``resultSummary``, in JavaScript string length (UTF-16 code units).
SUMMARY_MAX_CHARS: Final = 200


class ToolArgumentsError(DshSessionError, ValueError):
    """A program called a tool with arguments JSON cannot carry; nothing was dispatched."""


def normalize_tool_arguments(value: object = UNSET) -> Any:
    """The JSON-normalized form of a tool call's arguments: a fresh parse of their JSON
    text (tuples become lists, non-string keys strings).

    :param value: the arguments as the program gave them; ``msgspec.UNSET`` (the
        default) stands for JavaScript's ``undefined``, i.e. a call without arguments.
    :returns: plain JSON data (``dict``, ``list``, ``str``, numbers, ``bool``, ``None``).
    :raises ToolArgumentsError: with the reference's messages: no arguments (``tool
        arguments must be JSON-serializable (call the tool with an arguments object,
        e.g. `{}`)``); a callable, which JSON cannot represent at all (``... (got a value
        JSON cannot represent)``); or a value JSON cannot encode (``tool arguments must
        be JSON-serializable: <reason>``). Unlike ``JSON.stringify``, NaN and infinities
        are refused rather than written as ``null``.
    """
    return json.loads(_normalized_text(value))


def _normalized_text(value: object) -> str:
    """The canonical JSON text of tool arguments, after the reference's checks."""
    if value is UNSET:
        msg = (
            "tool arguments must be JSON-serializable (call the tool with an arguments "
            "object, e.g. `{}`)"
        )
        raise ToolArgumentsError(msg)
    if callable(value):
        # JSON.stringify of a function root yields nothing at all.
        msg = "tool arguments must be JSON-serializable (got a value JSON cannot represent)"
        raise ToolArgumentsError(msg)
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        msg = f"tool arguments must be JSON-serializable: {exc}"
        raise ToolArgumentsError(msg) from exc


def _block_text(block: ContentBlock | Mapping[str, Any]) -> str:
    if isinstance(block, Struct):
        kind = block.__struct_config__.tag
        text = getattr(block, "text", None) if kind == "text" else None
    else:
        kind = block.get("type")
        text = block.get("text") if kind == "text" else None
    if kind == "text":
        return text if isinstance(text, str) else ""
    return f"[{kind} content]"


def summarize_tool_result(content: Iterable[ContentBlock | Mapping[str, Any]]) -> str:
    """A sub-call's model-facing result as the ``resultSummary`` of its record.

    :param content: the result's content blocks, typed or in their wire shape.
    :returns: the text blocks' text, any other block as ``[<type> content]``, joined by
        ``\\n``; when that is longer than :data:`SUMMARY_MAX_CHARS` (in UTF-16 code units,
        as JavaScript counts), its first 200 units followed by ``…``. A cut that would
        split a surrogate pair ends before the pair (the reference would keep its first
        half, which no UTF-8 log can hold).
    """
    text = "\n".join(_block_text(b) for b in content)
    # A code point takes at most two UTF-16 units: short strings cannot be too long.
    if len(text) * 2 <= SUMMARY_MAX_CHARS or utf16_len(text) <= SUMMARY_MAX_CHARS:
        return text
    return utf16_prefix(text, SUMMARY_MAX_CHARS) + "…"


@dataclasses.dataclass(frozen=True, slots=True)
class SubDispatch:
    """One sub-call of a ``run_code`` program, numbered and with its arguments normalized.

    :param parent_call_id: the ``run_code`` call id.
    :param sub_call_id: ``<parent_call_id>:code:<n>``, ``n`` counting from 1 per run.
    :param name: the tool called.
    :param arguments_json: the canonical JSON text of the arguments.
    :param arguments: a parse of that text, to dispatch; the tool may change it freely,
        since the record is made from another parse of the same text.
    """

    parent_call_id: str
    sub_call_id: str
    name: str
    arguments_json: str
    arguments: Any = dataclasses.field(compare=False, repr=False)


class CodeDispatcher:
    """Numbers and records the sub-dispatches of one ``run_code`` execution.

    :param parent_call_id: the ``run_code`` call id.
    :param session: the calling agent's session; ``None`` (no agent) records nothing.
    """

    __slots__ = ("_count", "parent_call_id", "session")

    def __init__(self, parent_call_id: str, session: Session | None = None) -> None:
        self.parent_call_id = parent_call_id
        self.session = session
        self._count = 0

    @property
    def count(self) -> int:
        """How many sub-calls have been numbered so far."""
        return self._count

    def begin(self, name: str, arguments: object = UNSET) -> SubDispatch:
        """Normalize a sub-call's arguments, then give it the next sub-call id.

        :param name: the tool the program calls.
        :param arguments: its arguments (see :func:`normalize_tool_arguments`).
        :raises ToolArgumentsError: the arguments are not JSON; no id is used up.
        """
        text = _normalized_text(arguments)
        self._count += 1
        return SubDispatch(
            parent_call_id=self.parent_call_id,
            sub_call_id=f"{self.parent_call_id}:code:{self._count}",
            name=name,
            arguments_json=text,
            arguments=json.loads(text),
        )

    @staticmethod
    def payload(
        dispatch: SubDispatch,
        content: Iterable[ContentBlock | Mapping[str, Any]],
        *,
        is_error: bool,
    ) -> dict[str, Any]:
        """The ``tool/code-dispatch`` payload for a finished sub-call, in its wire shape."""
        return {
            "parentCallId": dispatch.parent_call_id,
            "subCallId": dispatch.sub_call_id,
            "name": dispatch.name,
            "arguments": json.loads(dispatch.arguments_json),
            "isError": is_error,
            "resultSummary": summarize_tool_result(content),
        }

    def record(
        self,
        dispatch: SubDispatch,
        content: Iterable[ContentBlock | Mapping[str, Any]],
        *,
        is_error: bool,
    ) -> Event | None:
        """Append the ``tool/code-dispatch`` record of a finished sub-call.

        Call it inside the parent ``run_code`` execution, so that the record is
        turn-enclosed.

        :param dispatch: what :meth:`begin` returned for the sub-call.
        :param content: the sub-call's result content blocks.
        :param is_error: whether the sub-call failed.
        :returns: the logged event, or ``None`` without a session.
        """
        if self.session is None:
            return None
        return self.session.append(
            "tool/code-dispatch", self.payload(dispatch, content, is_error=is_error)
        )

    def __repr__(self) -> str:
        return f"<CodeDispatcher {self.parent_call_id!r} after {self._count} sub-calls>"
