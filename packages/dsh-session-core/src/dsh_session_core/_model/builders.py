"""Builders: a small typed API over ``Session.append`` that keeps turns balanced.

The builders are :class:`~.turn.Turn` (what ``session.turn()`` returns, and the one-shot
injection turn behind ``session.inject()``) and :class:`~.step.Step` (what
``turn.step()`` returns). This module owns what they share: :class:`TurnStateError`, the
error a misuse of them raises, :class:`ToolCallRef` (a logged ``tool/call``, as a step
returns it), and how a caller's argument becomes what ``append`` gets, or is refused in
the builder's terms before anything is appended. The builders define
no wire shape of their own: every builder writes exactly the event a harness would
append by hand (``bench/run.py``'s standard turn, byte for byte), through
``Session.append``, or, when it can vouch for every value, as the payload that append
would decode, made directly (:mod:`.built`); either way a store's checks and plugins
see every event, and what is refused is refused as by hand.

The rules it keeps, from the reference's seeds:

- a turn is ``turn/start`` ... ``turn/end``; each step in it is ``step/start`` ...
  ``step/end``, numbered from 1; turns are numbered 1 + the last ``turn/start``'s;
- a block that raises ends the open step, then the turn: ``error`` (the step it failed
  on and the message, and its ``code`` when it has a string one) for an
  :class:`Exception`, ``aborted`` for any other ``BaseException``: a cancellation
  (``KeyboardInterrupt``, ``asyncio.CancelledError``, a closed generator's
  ``GeneratorExit``, ``SystemExit``); the exception propagates;
- a block that returns ends the turn ``completed``, or ``max-tokens`` when a step of it
  finished ``max-tokens`` (the cut-short fact wins over ``completed`` only); a step the
  model finished ``error`` makes it end ``error`` (the seeds: a turn fails when "a step
  threw or the model reported a failure"), and one it finished ``aborted``, ``aborted``:
  both take precedence over ``max-tokens``, as the seeds rank them (this mapping of
  finish reasons is the builders' reading; ``turn.end(reason)`` overrides it);
- a step that ends with a tool call unanswered (announced by its ``assistant/message``
  or logged by ``tool/call``, and no ``tool/result``) answers it first, as crash repair
  does: an error result saying no result was recorded (every provider refuses a
  request holding a call without its result; docs/decisions.md);
- an idle injection is its own turn: ``turn/start`` (trigger ``injection``),
  ``context/message``, ``turn/end`` (``completed``).
"""

from __future__ import annotations

__all__ = [
    "BLOCKS",
    "CHUNKS",
    "COMPLETED",
    "METHODS",
    "SOURCES",
    "SOURCE_TYPES",
    "USAGE",
    "USER",
    "Content",
    "ToolCallRef",
    "TurnStateError",
    "as_wire",
    "check_content",
    "check_object",
    "content_wire",
    "finish_of",
    "kind_of",
    "schema_error",
    "source_wire",
    "usage_ok",
    "wrong_type",
]

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import msgspec
from msgspec import UNSET

from ..errors import DshSessionError, SchemaError
from ..vocabulary import (
    ContentBlock,
    FinishReason,
    MessageSource,
    PluginSource,
    ReasoningBlock,
    ReasoningDeltaChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    UserSource,
)

if TYPE_CHECKING:
    from .session import Session

#: Content as a builder takes it: a string (one text block), or blocks, each a
#: vocabulary Struct (:class:`~dsh_session_core.TextBlock`...) or its wire dict.
Content: TypeAlias = str | Sequence[ContentBlock | Mapping[str, Any] | str]

_to_builtins = msgspec.to_builtins
USER: Final = {"kind": "user"}
COMPLETED: Final = {"kind": "completed"}


class TurnStateError(DshSessionError, RuntimeError):
    """A builder was used out of order (a step after its turn ended, a result for a call
    never made, a second open turn...). Nothing was appended."""


class ToolCallRef(msgspec.Struct, frozen=True, gc=False):
    """A logged ``tool/call``, as :meth:`Step.tool_call` returns it: pass it to
    :meth:`Step.tool_result`."""

    #: The seq of the ``tool/call`` (the result's ``sourceEventSeqs``).
    seq: int
    call_id: str
    name: str
    arguments: str


def as_wire(value: Any, trusted: Mapping[type, Callable[[Any], bool]] | None = None) -> Any:
    """A caller's value as ``append`` should get it.

    A dict is passed on as is (``append`` checks it fully). A Struct nested in a dict is
    taken by ``append`` as is, unchecked (a Struct constructor does not validate), so a
    Struct is passed on only when it is of a kind ``trusted`` lists for this position and
    its fields pass that kind's check (a type test per field: far cheaper than making
    builtins of it, which the chunks of a long stream would pay per token); any other
    Struct becomes builtins, for ``append`` to check. Anything else is left to
    ``append`` to judge.
    """
    cls = value.__class__
    if cls is dict:
        return value
    if trusted is not None:
        check = trusted.get(cls)
        if check is not None and check(value):
            return value
    if isinstance(value, msgspec.Struct):
        return _to_builtins(value)
    if isinstance(value, Mapping):  # a read-only JSON object of a logged event
        return dict(value)
    return value


def _is_count(value: object) -> bool:
    return value.__class__ is int or value is UNSET


def _text_ok(b: Any) -> bool:
    return b.text.__class__ is str


def _call_ok(b: ToolCallBlock) -> bool:
    return b.id.__class__ is str and b.name.__class__ is str and b.arguments.__class__ is str


def _delta_ok(c: Any) -> bool:
    return c.index.__class__ is int and c.text.__class__ is str


def usage_ok(u: TokenUsage) -> bool:
    return (u.input_tokens.__class__ is int and u.output_tokens.__class__ is int
            and _is_count(u.cache_read_tokens) and _is_count(u.cache_write_tokens)
            and _is_count(u.reasoning_tokens))


def _plugin_ok(s: PluginSource) -> bool:
    return s.plugin.__class__ is str


def _always(_: object) -> bool:
    return True


#: The Structs passed on as they are, per position, with the check each must pass.
BLOCKS: Final[Mapping[type, Callable[[Any], bool]]] = {
    TextBlock: _text_ok, ReasoningBlock: _text_ok, ToolCallBlock: _call_ok,
}
CHUNKS: Final[Mapping[type, Callable[[Any], bool]]] = {
    TextDeltaChunk: _delta_ok, ReasoningDeltaChunk: _delta_ok,
}
USAGE: Final[Mapping[type, Callable[[Any], bool]]] = {TokenUsage: usage_ok}
SOURCES: Final[Mapping[type, Callable[[Any], bool]]] = {
    UserSource: _always, PluginSource: _plugin_ok,
}


def content_wire(content: Content) -> Any:
    """Content in its wire shape: a string is one text block; a string in a list, too."""
    if content.__class__ is str:
        return [{"type": "text", "text": content}]
    if isinstance(content, msgspec.Struct):  # one block, not a list of them
        return [as_wire(content, BLOCKS)]
    if isinstance(content, Mapping) or not isinstance(content, Iterable):
        return content  # append refuses it with its path
    return [
        {"type": "text", "text": b} if b.__class__ is str else as_wire(b, BLOCKS)
        for b in content
    ]


def source_wire(source: MessageSource | Mapping[str, Any] | None) -> Any:
    return USER if source is None else as_wire(source, SOURCES)


def kind_of(value: object) -> str:
    """What a wrong argument is, for a message: ``int (123)``, ``dict``."""
    name = type(value).__name__
    if isinstance(value, bool | int | float) or value is None:
        return f"{name} ({value!r})"
    if isinstance(value, str):
        return f"str ({value[:40]!r})"
    return name


def schema_error(session: Session, event_type: str, path: str, message: str) -> SchemaError:
    """The error of a builder argument of the wrong type: what the append would refuse,
    said in the builder's terms (a store's ``strict=False`` would refuse it too, so
    unlike an unknown key it does not suggest one). Nothing was appended."""
    return SchemaError(message, event_type=event_type, seq=len(session._events), path=path,
                       plugin="core")


def wrong_type(session: Session, event_type: str, path: str, method: str, value: object,
                accepted: str) -> SchemaError:
    return schema_error(session, event_type, path,
                         f"{method} takes {accepted}; got {kind_of(value)}")


#: The builder method of each message type, for messages.
METHODS: Final = {"user/message": "user", "context/message": "context",
                   "steering/message": "steer"}
SOURCE_TYPES: Final = ("a source: UserSource(), PluginSource(plugin=...) or its wire dict "
                        "({\"kind\": \"user\"})")

#: What each content-taking builder accepts, for its message.
_CONTENT_TYPES: Final = ("a str (one text block) or a list of blocks, each a str, a "
                         "vocabulary block (TextBlock, ToolCallBlock...) or its wire dict")


def check_content(session: Session, event_type: str, method: str, content: object,
                   path: str = "$.content") -> None:
    """Refuse content of a type no builder takes, naming the types it takes."""
    cls = content.__class__
    if cls is str or isinstance(content, msgspec.Struct):
        return
    if isinstance(content, Mapping | str | bytes | bytearray) or not isinstance(
            content, Iterable):
        raise wrong_type(session, event_type, path, method, content, _CONTENT_TYPES)
    if isinstance(content, Sequence):
        for i, block in enumerate(content):
            if not (block.__class__ is str or isinstance(block, msgspec.Struct | Mapping)):
                raise schema_error(
                    session, event_type, f"{path}[{i}]",
                    f"{method}: block {i} of the content is {kind_of(block)}; a block is a "
                    f"str, a vocabulary block (TextBlock, ToolCallBlock...) or its wire dict")


def check_object(session: Session, event_type: str, path: str, method: str, value: object,
                  accepted: str) -> None:
    """Refuse a value that is neither a Struct nor a mapping (a source, a usage...)."""
    if not isinstance(value, msgspec.Struct | Mapping):
        raise wrong_type(session, event_type, path, method, value, accepted)


def finish_of(session: Session, finish: object) -> FinishReason:
    """``step.assistant(finish=...)`` read before anything is appended: it is not logged,
    so nothing else would check it."""
    accepted = ("finish= as a FinishReason (StopFinish(), MaxTokensFinish()...) or its "
                "wire dict ({\"kind\": \"stop\"})")
    check_object(session, "assistant/message", "finish", "step.assistant()", finish,
                  accepted)
    try:
        finished: FinishReason = msgspec.convert(as_wire(finish), FinishReason)
    except (msgspec.ValidationError, TypeError) as exc:
        raise schema_error(session, "assistant/message", "finish",
                            f"step.assistant() takes {accepted}: {exc}") from None
    return finished
