"""The model providers' request shapes, from the log, and recorders of their responses.

Derived messages (or a session) converted to what each provider's API takes, as plain
data (no SDK needed at run time, except pydantic-ai's own objects for
:func:`to_pydantic_ai`)::

    from dsh_session_core.providers import to_anthropic, to_openai_chat

    client.chat.completions.create(model=..., messages=to_openai_chat(session))
    client.messages.create(model=..., max_tokens=..., **to_anthropic(session))

The other direction: ``record_openai_chat``, ``record_openai_responses`` and
``record_anthropic`` (``arecord_*`` for async streams) write one model call's response,
streamed or not, into an open step: chunks, the assistant message, its tool calls.

A source is a :class:`~dsh_session_core.Session`, a sequence of derived messages, or
their wire JSON as ``dsh-session derive`` prints it. What a target cannot express, and
what is done with it, is in docs/providers.md; ``strict=True`` raises
:class:`UnsupportedContentError` instead of any fallback.
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from ..lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): `import dsh_session_core.providers` loads no conversion.
if _typing.TYPE_CHECKING:
    from ._anthropic import to_anthropic
    from ._openai_chat import to_openai_chat
    from ._openai_responses import to_openai_responses
    from ._pydantic_ai import to_pydantic_ai
    from ._record_anthropic import arecord_anthropic, record_anthropic
    from ._record_openai import (
        arecord_openai_chat,
        arecord_openai_responses,
        record_openai_chat,
        record_openai_responses,
    )
    from ._recording import RecordedResponse
    from ._source import UnsupportedContentError

# The TYPE_CHECKING imports above, this table and __all__ name the same names, each from
# the same module: tests/meta/test_lazy_exports.py checks it (lazy.py says why __all__
# is not built from this table).
_LAZY: dict[str, str] = {
    "RecordedResponse": "._recording",
    "arecord_anthropic": "._record_anthropic",
    "arecord_openai_chat": "._record_openai",
    "arecord_openai_responses": "._record_openai",
    "record_anthropic": "._record_anthropic",
    "record_openai_chat": "._record_openai",
    "record_openai_responses": "._record_openai",
    "UnsupportedContentError": "._source",
    "to_anthropic": "._anthropic",
    "to_openai_chat": "._openai_chat",
    "to_openai_responses": "._openai_responses",
    "to_pydantic_ai": "._pydantic_ai",
}

__all__ = [
    "RecordedResponse",
    "UnsupportedContentError",
    "arecord_anthropic",
    "arecord_openai_chat",
    "arecord_openai_responses",
    "record_anthropic",
    "record_openai_chat",
    "record_openai_responses",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
    "to_pydantic_ai",
]

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)
