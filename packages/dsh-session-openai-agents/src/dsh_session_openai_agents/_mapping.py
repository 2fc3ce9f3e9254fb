"""The mapping from SDK items to dsh events (:func:`record_items`): each item kept
verbatim as ``agents/item``, then recorded as the typed event that carries it in the
conversation (``user/message``, ``assistant/message``, ``tool/call``, ``tool/result``),
inside turns and steps."""

from __future__ import annotations

__all__ = ["record_items"]

from collections.abc import Sequence
from typing import Any

from dsh_session_core import Session, TextBlock, ToolCallBlock, to_wire

from ._view import _LogIndex


def _text_blocks(content: Any) -> list[TextBlock]:
    """The text of a message's or an output's content: a string, or the text parts of a
    list (``input_text``, ``output_text``, ``refusal``); other parts are kept in the
    ``agents/item`` only."""
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[TextBlock] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in ("input_text", "output_text", "text") and isinstance(
                part.get("text"), str
            ):
                blocks.append(TextBlock(text=part["text"]))
            elif kind == "refusal" and isinstance(part.get("refusal"), str):
                blocks.append(TextBlock(text=part["refusal"]))
    return blocks


def _kind(item: Any) -> str:
    """What an item is recorded as: ``user``, ``assistant``, ``call``, ``output``, or
    ``other`` (kept as ``agents/item`` only)."""
    if not isinstance(item, dict):
        return "other"
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message"):
        if role == "user":
            return "user"
        if role == "assistant":
            return "assistant"
        return "other"
    if (kind == "function_call" and isinstance(item.get("call_id"), str)
            and isinstance(item.get("name"), str) and isinstance(item.get("arguments"), str)):
        return "call"
    if kind == "function_call_output" and isinstance(item.get("call_id"), str):
        return "output"
    return "other"


def _check_items(session: Session, items: Sequence[Any]) -> None:
    """Refuse a batch holding an item the log cannot keep (a value JSON cannot carry,
    nesting too deep) before any of it is appended: each item is appended as
    ``agents/item`` to a scratch session with the same event types and rules, which
    raises what the real append would (:class:`~dsh_session_core.errors.NotJsonError`,
    ``TooDeepError``)."""
    scratch = Session(session.id, registry=session.registry, strict=session.strict,
                      foreign_types=session.foreign_types)
    for item in items:
        scratch.append("agents/item", {"item": item})


def record_items(session: Session, items: Sequence[Any]) -> None:
    """Append ``items`` to ``session``: each as ``agents/item``, followed by the typed
    event recording it, inside turns (a new turn at each user message that follows
    model output). The turns are closed when this returns.

    A batch holding an item the log cannot keep (a value JSON cannot carry, nesting too
    deep) is refused whole, before any of it is appended."""
    _record(_LogIndex(session).update(), items)


def _record(index: _LogIndex, items: Sequence[Any]) -> None:
    """:func:`record_items` on an up-to-date index of the session's log, which it
    leaves up to date."""
    session = index.session
    _check_items(session, items)
    calls = index.calls  # kept as the log's own fold would: update() agrees after
    groups: list[list[Any]] = []
    model_output = False
    for item in items:
        user = _kind(item) == "user"
        if not groups or (user and model_output):
            groups.append([])
            model_output = False
        groups[-1].append(item)
        model_output = model_output or not user
    try:
        for group in groups:
            with session.turn() as turn:
                step = None
                answered = False  # the open step holds a tool result
                for item in group:
                    session.append("agents/item", {"item": item})
                    kind = _kind(item)
                    if kind == "user":
                        blocks = _text_blocks(item.get("content"))
                        if blocks and step is None:
                            turn.user(blocks)
                        elif blocks:
                            turn.steer(blocks)
                        continue
                    if kind in ("assistant", "call") and (step is None or answered):
                        if step is not None:
                            step.end(answer=False)  # an output may come in a later batch
                        step, answered = turn.step(), False
                    if kind == "assistant":
                        assert step is not None
                        blocks = _text_blocks(item.get("content"))
                        if blocks:
                            step.assistant(blocks)
                    elif kind == "call":
                        assert step is not None
                        block = ToolCallBlock(id=item["call_id"], name=item["name"],
                                              arguments=item["arguments"])
                        step.assistant([block])
                        step.tool_call(block)
                        calls[block.id] = session.events[-1].seq
                    elif kind == "output":
                        call_id = item["call_id"]
                        seq = calls.pop(call_id, None)
                        if seq is None:
                            continue  # an output of no recorded call: kept as the item only
                        if step is None:
                            step, answered = turn.step(), False
                        output = item.get("output")
                        blocks = _text_blocks(output) if output is not None else []
                        if any(c.call_id == call_id for c in _step_calls(step)):
                            step.tool_result(call_id, blocks)
                        else:  # a call of an earlier add_items: answered by seq
                            session.append(
                                "tool/result",
                                {"turn": turn.number, "step": step.number, "callId": call_id,
                                 "content": [to_wire(b) for b in blocks], "isError": False},
                                surface_op="append", source_event_seqs=[seq],
                            )
                        answered = True
                if step is not None:
                    # A call the SDK is still running gets its output in a later batch
                    # (answered by seq, above): the builder must not answer it first.
                    step.end(answer=False)
    except BaseException:
        index.reset()  # what it kept of a half-appended batch: folded afresh next
        raise
    index.update()


def _step_calls(step: Any) -> list[Any]:
    """The tool calls the builder logged in ``step`` (its own bookkeeping)."""
    return list(getattr(step, "_calls", {}).values())
