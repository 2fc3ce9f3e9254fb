"""dsh-session plugin ``hooks``: hook bridge provenance: the hook/* events, the decision
rule, matchers, the Claude and Codex output decoders and the most-restrictive merge.

This is the library a Claude Code or Codex hook bridge builds on; the plugin itself only
registers the two log-only event types, ``hook/invoked`` and ``hook/result``. A bridge
selects hooks with :func:`matches_matcher`, records the invocation, runs the command,
decodes it, records the result, and folds every matched hook's output into one
decision::

    from dsh_session_hooks import (
        DEFAULT_STDERR_SUMMARY_MAX_CHARS,
        append_hook_invoked,
        append_hook_result,
        matches_matcher,
        merge_hook_outputs,
        parse_hook_output,
    )

    if matches_matcher("Bash", "Bash", "claude"):
        append_hook_invoked(session, turn=1, point="PreToolUse", dialect="claude",
                            handler_id="claude:PreToolUse:1", matcher="Bash")
        output = parse_hook_output(2, "", "bash is disabled", "PreToolUse")
        append_hook_result(session, turn=1, point="PreToolUse",
                           handler_id="claude:PreToolUse:1", output=output,
                           stderr_summary_max_chars=DEFAULT_STDERR_SUMMARY_MAX_CHARS,
                           duration_ms=14.3)
        merged = merge_hook_outputs([output])  # merged.decision == "deny"

The session must come from a store whose plugin manager loaded this plugin (it does
by default, through the ``dsh_session.plugins`` entry point named ``hooks``), or the
records are appended untyped, as opaque events.
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (and so
# every store and CLI command) does not pay for what it does not use.
if _typing.TYPE_CHECKING:
    from . import events
    from ._codec import HookDecision, HookOutput, parse_hook_output
    from ._decision import (
        DEFAULT_STDERR_SUMMARY_MAX_CHARS,
        append_hook_invoked,
        append_hook_result,
        hook_result_decision,
        summarize_stderr,
    )
    from ._matcher import MatcherMode, matches_matcher
    from ._merge import MergedDecision, MergedHookOutput, merge_hook_outputs
    from ._runner import (
        DEFAULT_HOOK_TIMEOUT_MS,
        CommandHook,
        HookExecutor,
        HookProcessResult,
        HookRunRequest,
        RunHookResult,
        run_hook,
    )
    from .errors import HookArgumentError
    from .events import HookDialect, HookInvoked, HookInvokedData, HookResult, HookResultData

_LAZY: dict[str, str] = {
    "CommandHook": "._runner",
    "DEFAULT_HOOK_TIMEOUT_MS": "._runner",
    "DEFAULT_STDERR_SUMMARY_MAX_CHARS": "._decision",
    "HookArgumentError": ".errors",
    "HookDecision": "._codec",
    "HookDialect": ".events",
    "HookExecutor": "._runner",
    "HookInvoked": ".events",
    "HookInvokedData": ".events",
    "HookOutput": "._codec",
    "HookProcessResult": "._runner",
    "HookResult": ".events",
    "HookResultData": ".events",
    "HookRunRequest": "._runner",
    "MatcherMode": "._matcher",
    "MergedDecision": "._merge",
    "MergedHookOutput": "._merge",
    "RunHookResult": "._runner",
    "append_hook_invoked": "._decision",
    "append_hook_result": "._decision",
    "events": ".events",
    "hook_result_decision": "._decision",
    "matches_matcher": "._matcher",
    "merge_hook_outputs": "._merge",
    "parse_hook_output": "._codec",
    "run_hook": "._runner",
    "summarize_stderr": "._decision",
}

__all__ = [
    "DEFAULT_HOOK_TIMEOUT_MS",
    "DEFAULT_STDERR_SUMMARY_MAX_CHARS",
    "CommandHook",
    "HookArgumentError",
    "HookDecision",
    "HookDialect",
    "HookExecutor",
    "HookInvoked",
    "HookInvokedData",
    "HookOutput",
    "HookProcessResult",
    "HookResult",
    "HookResultData",
    "HookRunRequest",
    "MatcherMode",
    "MergedDecision",
    "MergedHookOutput",
    "RunHookResult",
    "append_hook_invoked",
    "append_hook_result",
    "events",
    "hook_result_decision",
    "matches_matcher",
    "merge_hook_outputs",
    "parse_hook_output",
    "run_hook",
    "summarize_stderr",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session-hooks")
