"""dsh-session: a durable, typed, event-sourced session log for LLM agent harnesses.

A :class:`Session` is an append-only log of typed events; the LLM message history is
derived from it (:meth:`Session.derive_messages`), never stored. A
:class:`SessionStore` creates and forks sessions and wires them to plugins, which
contribute event types and listen to appends through pluggy hooks found in the
``dsh_session.plugins`` entry-point group::

    from dsh_session_core import SessionStore

    store = SessionStore()
    session = store.create(cwd="/work")
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                       "source": {"kind": "user"}}})
    session.append("user/message", {"content": [{"type": "text", "text": "hi"}],
                                    "source": {"kind": "user"}}, surface_op="append")
    session.derive_messages()
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

from .lazy import lazy_exports as _lazy_exports

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
_TYPE_CHECKING = False


# The package imports lazily (PEP 562): ``dsh-session --help`` and other light uses do
# not pay for msgspec classes, pluggy and importlib.metadata until a name is used.
# Type checkers see the real imports below.
if _TYPE_CHECKING:
    from . import errors, events, hookspecs, vocabulary
    from ._base.json_values import MAX_JSON_DEPTH, JsonObject, JsonValue
    from ._base.names import ENTRY_POINT_GROUP, PROJECT_NAME
    from ._logformat.read import read_session
    from ._model.builders import ToolCallRef, TurnStateError
    from ._model.code_dispatch import (
        CodeDispatcher,
        SubDispatch,
        ToolArgumentsError,
        normalize_tool_arguments,
        summarize_tool_result,
    )
    from ._model.repair import interrupted_turn_closers
    from ._model.request_header import (
        RequestHeaderWriter,
        apply_header_delta,
        canonical_header,
        diff_header,
        fold_request_header,
        header_equals,
        record_request_header,
    )
    from ._model.resurface import resurface
    from ._model.session import EventsView, Session
    from ._model.step import Step
    from ._model.store import SessionStore
    from ._model.surface import Surface, SurfaceNode
    from ._model.tool_outcome import ToolOutcome
    from ._model.tool_pairing import is_tool_pairing_balanced
    from ._model.turn import Turn
    from ._persistence.backends.jsonl.backend import JsonlBackend
    from ._persistence.backends.memory import MemoryBackend
    from ._persistence.backends.postgres.backend import PostgresBackend
    from ._persistence.backends.sqlite.backend import SqliteBackend
    from ._persistence.base import Backend, Deleted, SessionLockedError, StoredLog, WriterLock
    from ._persistence.capabilities import (
        AsyncAppend,
        AsyncClose,
        AsyncFollow,
        AsyncList,
        AsyncTail,
        Capabilities,
        Deletable,
        HeldDeletable,
        LineReads,
        Projecting,
        Resumable,
        Rewritable,
        Scrubbable,
        Searchable,
        SelectiveSummaries,
        TypedLineReads,
    )
    from ._persistence.copy import CopyProgress, CopyReport, SessionCopy, copy_sessions
    from ._persistence.encryption.keyring import Keyring
    from ._persistence.encryption.rekey import Rekeyed
    from ._persistence.encryption.sealed import SealedBackend
    from ._persistence.listing import (
        SessionName,
        is_hidden,
        label_of,
        name_of,
        named_labels,
        stored_label,
    )
    from ._persistence.opening import open_store
    from ._persistence.projections.naming import stored_name
    from ._persistence.projections.read import ProjectionView
    from ._persistence.retention.forget import Forgotten
    from ._persistence.retention.plan import PruneDecision, PruneReport
    from ._persistence.retention.policy import RetentionPolicy
    from ._persistence.store.coordinator import PersistenceError, PersistencePlugin
    from ._persistence.store.durable import DurableStore
    from ._persistence.urls import StorePlace, store_place
    from ._plugins.core_plugin import core_registry
    from ._plugins.manager import PluginManager, create_plugin_manager, hookimpl
    from ._schema.codec import encode_event, encode_events, to_wire
    from ._schema.header import SEALED_FORMAT_VERSION, SESSION_FORMAT_VERSION, SessionHeader
    from ._schema.projections import Projection
    from ._schema.registry import EventRegistry, EventSpec, RegisteredEvent
    from ._schema.retention_events import (
        RetentionMark,
        RetentionMarkData,
        RetentionRemoval,
        RetentionRemovalData,
    )
    from ._schema.unions import RegisteredMember, UnionMember
    from ._schema.validate import Problem, check_events
    from ._search import SearchHit, SearchResults, UnreadableSession
    from .events import (
        SURFACE_TYPES,
        Event,
        OpaqueEvent,
        ReplaceOp,
        SurfaceEvent,
        SurfaceOp,
        is_surface_eligible_type,
        is_surface_event,
    )
    from .vocabulary import (
        AbortedFinish,
        AbortedReason,
        BlockEndChunk,
        BlockStartChunk,
        CompletedReason,
        DisposedReason,
        ErrorFinish,
        ErrorReason,
        FinishChunk,
        ImageBlock,
        InjectionTrigger,
        InterruptedReason,
        MaxTokensFinish,
        MaxTokensReason,
        Message,
        MessageTrigger,
        PluginSource,
        ReasoningBlock,
        ReasoningDeltaChunk,
        RejectedReason,
        StopFinish,
        TextBlock,
        TextDeltaChunk,
        TokenUsage,
        ToolCallBlock,
        ToolCallDeltaChunk,
        ToolCallsFinish,
        ToolResultBlock,
        UsageChunk,
        UserSource,
    )

# The TYPE_CHECKING imports above, this table and __all__ name the same names, each from
# the same module: tests/meta/test_lazy_exports.py checks it (lazy.py says why __all__
# is not built from this table).
_LAZY: dict[str, str] = {
    "Step": "._model.step",
    "ToolCallRef": "._model.builders",
    "Turn": "._model.turn",
    "TurnStateError": "._model.builders",
    "read_session": "._logformat.read",
    "resurface": "._model.resurface",
    "AbortedFinish": ".vocabulary",
    "AbortedReason": ".vocabulary",
    "BlockEndChunk": ".vocabulary",
    "BlockStartChunk": ".vocabulary",
    "CompletedReason": ".vocabulary",
    "DisposedReason": ".vocabulary",
    "ErrorFinish": ".vocabulary",
    "ErrorReason": ".vocabulary",
    "FinishChunk": ".vocabulary",
    "InterruptedReason": ".vocabulary",
    "MaxTokensFinish": ".vocabulary",
    "MaxTokensReason": ".vocabulary",
    "ReasoningDeltaChunk": ".vocabulary",
    "RejectedReason": ".vocabulary",
    "StopFinish": ".vocabulary",
    "TextDeltaChunk": ".vocabulary",
    "ToolCallDeltaChunk": ".vocabulary",
    "ToolCallsFinish": ".vocabulary",
    "UsageChunk": ".vocabulary",
    "ImageBlock": ".vocabulary",
    "InjectionTrigger": ".vocabulary",
    "MessageTrigger": ".vocabulary",
    "PluginSource": ".vocabulary",
    "ReasoningBlock": ".vocabulary",
    "TextBlock": ".vocabulary",
    "TokenUsage": ".vocabulary",
    "ToolCallBlock": ".vocabulary",
    "ToolResultBlock": ".vocabulary",
    "UserSource": ".vocabulary",
    "RequestHeaderWriter": "._model.request_header",
    "record_request_header": "._model.request_header",
    "ToolOutcome": "._model.tool_outcome",
    "CopyProgress": "._persistence.copy",
    "CopyReport": "._persistence.copy",
    "SessionCopy": "._persistence.copy",
    "copy_sessions": "._persistence.copy",
    "Backend": "._persistence.base",
    "AsyncAppend": "._persistence.capabilities",
    "AsyncClose": "._persistence.capabilities",
    "AsyncFollow": "._persistence.capabilities",
    "AsyncList": "._persistence.capabilities",
    "AsyncTail": "._persistence.capabilities",
    "Capabilities": "._persistence.capabilities",
    "Deletable": "._persistence.capabilities",
    "HeldDeletable": "._persistence.capabilities",
    "LineReads": "._persistence.capabilities",
    "Resumable": "._persistence.capabilities",
    "Searchable": "._persistence.capabilities",
    "Rewritable": "._persistence.capabilities",
    "Scrubbable": "._persistence.capabilities",
    "Projecting": "._persistence.capabilities",
    "SelectiveSummaries": "._persistence.capabilities",
    "TypedLineReads": "._persistence.capabilities",
    "Deleted": "._persistence.base",
    "Forgotten": "._persistence.retention.forget",
    "PruneDecision": "._persistence.retention.plan",
    "PruneReport": "._persistence.retention.plan",
    "RetentionPolicy": "._persistence.retention.policy",
    "RetentionMark": "._schema.retention_events",
    "RetentionMarkData": "._schema.retention_events",
    "RetentionRemoval": "._schema.retention_events",
    "RetentionRemovalData": "._schema.retention_events",
    "SearchHit": "._search",
    "SearchResults": "._search",
    "UnreadableSession": "._search",
    "SessionLockedError": "._persistence.base",
    "StoredLog": "._persistence.base",
    "WriterLock": "._persistence.base",
    "PersistenceError": "._persistence.store.coordinator",
    "PersistencePlugin": "._persistence.store.coordinator",
    "JsonlBackend": "._persistence.backends.jsonl.backend",
    "MemoryBackend": "._persistence.backends.memory",
    "PostgresBackend": "._persistence.backends.postgres.backend",
    "SqliteBackend": "._persistence.backends.sqlite.backend",
    "DurableStore": "._persistence.store.durable",
    "open_store": "._persistence.opening",
    "Keyring": "._persistence.encryption.keyring",
    "Rekeyed": "._persistence.encryption.rekey",
    "SealedBackend": "._persistence.encryption.sealed",
    "StorePlace": "._persistence.urls",
    "store_place": "._persistence.urls",
    "CodeDispatcher": "._model.code_dispatch",
    "SubDispatch": "._model.code_dispatch",
    "ToolArgumentsError": "._model.code_dispatch",
    "normalize_tool_arguments": "._model.code_dispatch",
    "summarize_tool_result": "._model.code_dispatch",
    "stored_label": "._persistence.listing",
    "stored_name": "._persistence.projections.naming",
    "SessionName": "._persistence.listing",
    "name_of": "._persistence.listing",
    "ENTRY_POINT_GROUP": "._base.names",
    "Event": ".events",
    "EventRegistry": "._schema.registry",
    "EventSpec": "._schema.registry",
    "Projection": "._schema.projections",
    "ProjectionView": "._persistence.projections.read",
    "UnionMember": "._schema.unions",
    "RegisteredMember": "._schema.unions",
    "EventsView": "._model.session",
    "JsonObject": "._base.json_values",
    "JsonValue": "._base.json_values",
    "MAX_JSON_DEPTH": "._base.json_values",
    "Message": ".vocabulary",
    "OpaqueEvent": ".events",
    "PROJECT_NAME": "._base.names",
    "PluginManager": "._plugins.manager",
    "Problem": "._schema.validate",
    "RegisteredEvent": "._schema.registry",
    "ReplaceOp": ".events",
    "SESSION_FORMAT_VERSION": "._schema.header",
    "SEALED_FORMAT_VERSION": "._schema.header",
    "SURFACE_TYPES": ".events",
    "Session": "._model.session",
    "SessionHeader": "._schema.header",
    "SessionStore": "._model.store",
    "Surface": "._model.surface",
    "SurfaceEvent": ".events",
    "SurfaceNode": "._model.surface",
    "SurfaceOp": ".events",
    "apply_header_delta": "._model.request_header",
    "canonical_header": "._model.request_header",
    "check_events": "._schema.validate",
    "core_registry": "._plugins.core_plugin",
    "create_plugin_manager": "._plugins.manager",
    "diff_header": "._model.request_header",
    "encode_event": "._schema.codec",
    "encode_events": "._schema.codec",
    "errors": ".errors",
    "events": ".events",
    "fold_request_header": "._model.request_header",
    "header_equals": "._model.request_header",
    "hookimpl": "._plugins.manager",
    "hookspecs": ".hookspecs",
    "interrupted_turn_closers": "._model.repair",
    "is_hidden": "._persistence.listing",
    "is_surface_eligible_type": ".events",
    "is_surface_event": ".events",
    "is_tool_pairing_balanced": "._model.tool_pairing",
    "label_of": "._persistence.listing",
    "named_labels": "._persistence.listing",
    "to_wire": "._schema.codec",
    "vocabulary": ".vocabulary",
}

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_JSON_DEPTH",
    "PROJECT_NAME",
    "SEALED_FORMAT_VERSION",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "AbortedFinish",
    "AbortedReason",
    "AsyncAppend",
    "AsyncClose",
    "AsyncFollow",
    "AsyncList",
    "AsyncTail",
    "Backend",
    "BlockEndChunk",
    "BlockStartChunk",
    "Capabilities",
    "CodeDispatcher",
    "CompletedReason",
    "CopyProgress",
    "CopyReport",
    "Deletable",
    "Deleted",
    "DisposedReason",
    "DurableStore",
    "ErrorFinish",
    "ErrorReason",
    "Event",
    "EventRegistry",
    "EventSpec",
    "EventsView",
    "FinishChunk",
    "Forgotten",
    "HeldDeletable",
    "ImageBlock",
    "InjectionTrigger",
    "InterruptedReason",
    "JsonObject",
    "JsonValue",
    "JsonlBackend",
    "Keyring",
    "LineReads",
    "MaxTokensFinish",
    "MaxTokensReason",
    "MemoryBackend",
    "Message",
    "MessageTrigger",
    "OpaqueEvent",
    "PersistenceError",
    "PersistencePlugin",
    "PluginManager",
    "PluginSource",
    "PostgresBackend",
    "Problem",
    "Projecting",
    "Projection",
    "ProjectionView",
    "PruneDecision",
    "PruneReport",
    "ReasoningBlock",
    "ReasoningDeltaChunk",
    "RegisteredEvent",
    "RegisteredMember",
    "RejectedReason",
    "Rekeyed",
    "ReplaceOp",
    "RequestHeaderWriter",
    "Resumable",
    "RetentionMark",
    "RetentionMarkData",
    "RetentionPolicy",
    "RetentionRemoval",
    "RetentionRemovalData",
    "Rewritable",
    "Scrubbable",
    "SealedBackend",
    "SearchHit",
    "SearchResults",
    "Searchable",
    "SelectiveSummaries",
    "Session",
    "SessionCopy",
    "SessionHeader",
    "SessionLockedError",
    "SessionName",
    "SessionStore",
    "SqliteBackend",
    "Step",
    "StopFinish",
    "StorePlace",
    "StoredLog",
    "SubDispatch",
    "Surface",
    "SurfaceEvent",
    "SurfaceNode",
    "SurfaceOp",
    "TextBlock",
    "TextDeltaChunk",
    "TokenUsage",
    "ToolArgumentsError",
    "ToolCallBlock",
    "ToolCallDeltaChunk",
    "ToolCallRef",
    "ToolCallsFinish",
    "ToolOutcome",
    "ToolResultBlock",
    "Turn",
    "TurnStateError",
    "TypedLineReads",
    "UnionMember",
    "UnreadableSession",
    "UsageChunk",
    "UserSource",
    "WriterLock",
    "apply_header_delta",
    "canonical_header",
    "check_events",
    "copy_sessions",
    "core_registry",
    "create_plugin_manager",
    "diff_header",
    "encode_event",
    "encode_events",
    "errors",
    "events",
    "fold_request_header",
    "header_equals",
    "hookimpl",
    "hookspecs",
    "interrupted_turn_closers",
    "is_hidden",
    "is_surface_eligible_type",
    "is_surface_event",
    "is_tool_pairing_balanced",
    "label_of",
    "name_of",
    "named_labels",
    "normalize_tool_arguments",
    "open_store",
    "read_session",
    "record_request_header",
    "resurface",
    "store_place",
    "stored_label",
    "stored_name",
    "summarize_tool_result",
    "to_wire",
    "vocabulary",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-core")
