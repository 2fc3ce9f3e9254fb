"""The mapping of pydantic-ai messages onto dsh's typed events (:class:`MessageWriter`),
and the conversation a history derives (:func:`history_messages`: the store makes the
surface that one with core's ``resurface`` when the conversation branched).

A ``ModelRequest``'s ``UserPromptPart`` is a ``user/message`` (its text and images), a
``ToolReturnPart`` (or a ``RetryPromptPart`` naming a tool) the ``tool/result`` of its
call; a ``ModelResponse`` is one step: an ``assistant/message`` of its text, tool calls
and thinking (with the response's token usage), then a ``tool/call`` per call. The
system prompt a request is sent with, as pydantic-ai's models compose it (every
``SystemPromptPart`` of the history so far, then the request's ``instructions``), is
the ``system`` of the request header the next response's step records first (core's
``record_request_header``: a ``request/header``, or a delta when it changed; nothing
when it did not), with the response's model: so ``show`` prints it, and a provider
conversion of the session sends it as its system prompt. What has no typed event
(files other than images, built-in tool parts) stays in the entry only, which keeps
every message whole. The events are appended by hand, not with the builders: a step
may end with calls whose results a later save brings (a run paused on deferred tools),
which the builders would answer with an error result.
"""

from __future__ import annotations

__all__ = ["MessageWriter", "history_messages", "pending_calls", "system_prompts"]

import base64
from collections.abc import Iterable
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from dsh_session_core import (
    Message,
    Session,
    TokenUsage,
    record_request_header,
    to_wire,
)

#: The plugin named as the source of a turn whose first message is no user prompt.
PLUGIN = "pydantic-ai"
_USER = {"kind": "user"}


def pending_calls(session: Session) -> dict[str, int]:
    """The tool calls of ``session`` no ``tool/result`` answers: call id to the seq of
    its ``tool/call`` (a later save may bring their results)."""
    calls: dict[str, int] = {}
    for event in session.events:
        if event.type == "tool/call":
            calls[event.data.call_id] = event.seq
        elif event.type == "tool/result":
            calls.pop(event.data.call_id, None)
    return calls


def system_prompts(messages: Iterable[Any]) -> list[str]:
    """The contents of the ``SystemPromptPart``s of ``messages``, each a message as
    pydantic-ai's ``ModelMessagesTypeAdapter`` dumps it to JSON, in order."""
    return [part["content"] for message in messages if message.get("kind") == "request"
            for part in message.get("parts") or ()
            if isinstance(part, dict) and part.get("part_kind") == "system-prompt"
            and isinstance(part.get("content"), str)]


def _text(text: str) -> dict[str, Any]:
    # Wire dicts, not blocks: the append checks them (a block's own encoding would
    # raise on text the log keeps, a lone surrogate).
    return {"type": "text", "text": text}


def _user_blocks(part: UserPromptPart) -> list[Any]:
    """A prompt's text and images as wire blocks; other content stays in the entry only."""
    if isinstance(part.content, str):
        return [_text(part.content)]
    blocks: list[Any] = []
    for item in part.content:
        if isinstance(item, str):
            blocks.append(_text(item))
        elif isinstance(item, ImageUrl):
            blocks.append({"type": "image", "mediaType": item.media_type, "url": item.url})
        elif isinstance(item, BinaryContent) and item.is_image:
            blocks.append({"type": "image", "mediaType": item.media_type,
                           "data": base64.b64encode(item.data).decode("ascii")})
    return blocks


def _usage(response: ModelResponse) -> TokenUsage | None:
    usage = response.usage
    if not (usage.input_tokens or usage.output_tokens):
        return None
    return TokenUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)


class MessageWriter:
    """Appends the typed events of messages into the open turn ``turn`` of ``session``.

    :param calls: the calls still unanswered (:func:`pending_calls`), which the results
        of these messages answer; kept up to date.

    :attr:`complete` turns ``False`` when a message's typed events do not carry it all
    in the derived conversation (a result whose call the log holds no open one of): the
    caller then makes the surface the history's (core's ``resurface``).
    """

    def __init__(self, session: Session, turn: int, calls: dict[str, int],
                 prompts: Iterable[str] = ()) -> None:
        self.session = session
        self.turn = turn
        self.calls = calls
        self.step: int | None = None
        self.steps = 0
        self.complete = True
        #: The system prompt parts of the history so far (``prompts``: those of the
        #: messages written before these), and the latest request's instructions.
        self.prompts = list(prompts)
        self.instructions: str | None = None
        #: The system prompt the next response's request was sent with (``None``: no
        #: request of these messages said, the log's header stands).
        self.system: str | None = None

    def write(self, message: ModelMessage) -> None:
        """Append the events of one message."""
        if isinstance(message, ModelResponse):
            self._response(message)
            return
        self.prompts.extend(p.content for p in message.parts
                            if isinstance(p, SystemPromptPart))
        self.instructions = message.instructions or None
        parts = [*self.prompts, *([self.instructions] if self.instructions else [])]
        self.system = "\n\n".join(parts) if parts else None
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                blocks = _user_blocks(part)
                if blocks:
                    self.close_step()
                    self.session.append(
                        "user/message",
                        {"content": blocks, "source": _USER},
                        surface_op="append")
            elif isinstance(part, ToolReturnPart):
                self._result(part.tool_call_id, part.model_response_str(),
                             part.outcome in ("failed", "retried", "denied"))
            elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
                self._result(part.tool_call_id, part.model_response(), True)

    def _response(self, response: ModelResponse) -> None:
        blocks: list[Any] = []
        calls: list[dict[str, Any]] = []
        for part in response.parts:
            if isinstance(part, TextPart):
                blocks.append(_text(part.content))
            elif isinstance(part, ToolCallPart):
                call = {"type": "tool-call", "id": part.tool_call_id, "name": part.tool_name,
                        "arguments": part.args_as_json_str()}
                blocks.append(call)
                calls.append(call)
            elif isinstance(part, ThinkingPart):
                blocks.append({"type": "reasoning", "text": part.content})
        self.open_step()
        if self.system is not None:
            # The header the request was built under, recorded when it differs from the
            # log's (the first one, a changed prompt or model).
            record_request_header(self.session, {
                "config": {"model": response.model_name or "unknown"},
                "system": self.system}, first=False)
        data: dict[str, Any] = {"turn": self.turn, "step": self.step, "content": blocks}
        usage = _usage(response)
        if usage is not None:
            data["usage"] = to_wire(usage)
        self.session.append("assistant/message", data, surface_op="append")
        for call in calls:
            event = self.session.append(
                "tool/call", {"turn": self.turn, "step": self.step, "callId": call["id"],
                              "name": call["name"], "arguments": call["arguments"]})
            self.calls[call["id"]] = event.seq

    def _result(self, call_id: str, text: str, is_error: bool) -> None:
        seq = self.calls.pop(call_id, None)
        if seq is None:  # its call is answered already, or is in no log of ours
            self.complete = False
            return
        if self.step is None:
            self.open_step()
        self.session.append(
            "tool/result",
            {"turn": self.turn, "step": self.step, "callId": call_id,
             "content": [_text(text)], "isError": is_error},
            surface_op="append", source_event_seqs=[seq])

    def open_step(self) -> None:
        self.close_step()
        self.steps += 1
        self.step = self.steps
        self.session.append("step/start", {"turn": self.turn, "step": self.step})

    def close_step(self) -> None:
        if self.step is not None:
            self.session.append("step/end", {"turn": self.turn, "step": self.step})
            self.step = None


def history_messages(session: Session, messages: Iterable[ModelMessage]) -> list[Message]:
    """The derived conversation that ``messages`` recorded alone would give: written into
    a scratch session of ``session``'s event types, then derived."""
    scratch = Session(session.id, registry=session.registry, strict=session.strict,
                      foreign_types=session.foreign_types)
    scratch.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                         "source": _USER}})
    writer = MessageWriter(scratch, 1, {})
    for message in messages:
        writer.write(message)
    writer.close_step()
    return scratch.derive_messages()
