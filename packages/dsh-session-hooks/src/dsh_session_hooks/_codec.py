"""Decoding a hook process's outcome (exit code, stdout, stderr) for both dialects.

Claude Code and Codex share the protocol this module reads: exit 2 blocks with stderr as
the reason, exit 0 may print a JSON object with structured fields, any other exit is a
non-blocking error. The decoder is total: bad output yields fewer fields, never an error.
Which fields matter at a given hook point is the bridge's business.
"""

from __future__ import annotations

__all__ = ["HookDecision", "HookOutput", "parse_hook_output"]

from typing import Any, Final, Literal, TypeAlias

from msgspec import Struct

from dsh_session_core import JsonObject, JsonValue
from dsh_session_core.jscompat import js_trim, json_parse

#: A decision a hook can express: ``approve``/``block`` at the top level of its JSON,
#: ``allow``/``deny``/``ask`` as ``hookSpecificOutput.permissionDecision``, ``block``
#: by exiting with 2.
HookDecision: TypeAlias = Literal["approve", "allow", "block", "deny", "ask"]

_BLOCKING_EXIT_CODE: Final = 2

# The legacy top-level ``decision`` may only be approve/block in both dialects' schemas:
# a top-level "deny" is invalid and must not become a real blocking decision.
_TOP_LEVEL_DECISIONS: Final[frozenset[str]] = frozenset({"approve", "block"})
_PERMISSION_DECISIONS: Final[frozenset[str]] = frozenset({"allow", "deny", "ask"})


class HookOutput(Struct, frozen=True, kw_only=True):
    """What one hook run said, in dialect-neutral form. ``None`` means absent.

    :ivar exit_code: the process exit code; ``None`` when it never exited normally
        (could not run, or died by a signal).
    :ivar stderr: stderr, trimmed (the block reason on exit 2).
    :ivar stdout: stdout, trimmed, verbatim: plain text is the bridge's to use.
    :ivar continue_: the hook's ``continue`` (``False`` asks to halt). Named with a
        trailing underscore because ``continue`` is a Python keyword.
    :ivar stop_reason: shown when the hook halts.
    :ivar decision: the hook's decision; see :data:`HookDecision`.
    :ivar reason: the reason accompanying the decision.
    :ivar hook_event_name: the event ``hookSpecificOutput`` claimed to answer, recorded
        even when it does not match the firing event.
    :ivar additional_context: context to inject for the model.
    :ivar system_message: a warning for the user.
    :ivar updated_input: a tool-input rewrite the hook asked for (read-only). Parsed,
        never honoured: a bridge warns when it is present.
    """

    exit_code: int | None = None
    stderr: str = ""
    stdout: str = ""
    continue_: bool | None = None
    stop_reason: str | None = None
    decision: HookDecision | None = None
    reason: str | None = None
    hook_event_name: str | None = None
    additional_context: str | None = None
    system_message: str | None = None
    updated_input: JsonObject | None = None


def parse_hook_output(
    exit_code: int | None,
    stdout: str,
    stderr: str,
    expected_event_name: str | None = None,
) -> HookOutput:
    """Decode one hook run. Never raises on any output.

    - exit 2: ``decision="block"``, ``reason`` = trimmed stderr when not blank; stdout
      is ignored, even valid JSON.
    - exit 0 with trimmed stdout starting with ``{``: a JSON object's structured fields
      are applied (each only when of the right JSON type); malformed JSON or a non-object
      applies nothing.
    - any other exit (1, ``None``...): no decision, nothing parsed.

    :param exit_code: the process exit code, or ``None`` when it never exited normally.
    :param stdout: the captured stdout.
    :param stderr: the captured stderr.
    :param expected_event_name: the firing hook point. When given, a
        ``hookSpecificOutput`` whose ``hookEventName`` differs or is missing has its
        event-scoped fields discarded (its ``hookEventName`` is still recorded, and the
        top-level fields stay). ``None`` applies the block as is.
    :returns: the decoded output.
    """
    err = js_trim(stderr)
    out = js_trim(stdout)
    fields: dict[str, Any] = {}
    if exit_code == _BLOCKING_EXIT_CODE:
        fields["decision"] = "block"
        if err:
            fields["reason"] = err
    elif exit_code == 0 and out.startswith("{"):
        parsed = _parse_json(out)
        if isinstance(parsed, dict):
            _apply_structured(fields, parsed, expected_event_name)
    return HookOutput(exit_code=exit_code, stderr=err, stdout=out, **fields)


def _parse_json(text: str) -> object:
    """``text`` parsed as ``JSON.parse`` would, or ``None`` when it is not JSON."""
    try:
        return json_parse(text)
    except (ValueError, RecursionError):  # malformed, or nested deeper than we parse
        return None


def _string(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if type(value) is str else None


def _apply_structured(
    fields: dict[str, Any], parsed: dict[str, Any], expected_event_name: str | None
) -> None:
    """Fold a structured stdout object into ``fields`` (the order of the reference)."""
    cont = parsed.get("continue")
    if type(cont) is bool:  # a real boolean: 0, 1 or "false" do not count
        fields["continue_"] = cont
    for key, name in (("stopReason", "stop_reason"), ("systemMessage", "system_message")):
        text = _string(parsed, key)
        if text is not None:
            fields[name] = text
    decision = _string(parsed, "decision")
    if decision in _TOP_LEVEL_DECISIONS:
        fields["decision"] = decision
    reason = _string(parsed, "reason")
    if reason is not None:
        fields["reason"] = reason

    specific = parsed.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        return
    event_name = _string(specific, "hookEventName")
    if event_name is not None:
        # Recorded even on a mismatch: the log should show what the block claimed.
        fields["hook_event_name"] = event_name
    if expected_event_name is not None and event_name != expected_event_name:
        return  # a block for another event (or for none) cannot steer this one
    permission = _string(specific, "permissionDecision")
    if permission in _PERMISSION_DECISIONS:
        fields["decision"] = permission
    permission_reason = _string(specific, "permissionDecisionReason")
    if permission_reason is not None:
        # Overrides the top-level reason even without a permissionDecision.
        fields["reason"] = permission_reason
    context = _string(specific, "additionalContext")
    if context is not None:
        fields["additional_context"] = context
    updated = specific.get("updatedInput")
    if isinstance(updated, dict):
        fields["updated_input"] = _freeze(updated)


def _freeze(root: dict[str, Any]) -> JsonObject:
    """A parsed JSON object in read-only form (objects as :class:`JsonObject`, arrays as
    tuples). Iterative, because the parser accepts nesting deep enough to exhaust the
    recursion limit of a recursive walk started from further down the stack."""
    # Post-order walk: a container is built once all its children are, from the tail of
    # ``built`` (children are pushed in reverse so they are finished in order).
    stack: list[tuple[Any, bool]] = [(root, False)]
    built: list[JsonValue] = []
    while stack:
        value, children_done = stack.pop()
        kind = type(value)
        if kind is not dict and kind is not list:
            built.append(value)
            continue
        if not children_done:
            stack.append((value, True))
            children = value.values() if kind is dict else value
            stack.extend((child, False) for child in reversed(list(children)))
            continue
        n = len(value)
        items = built[len(built) - n :] if n else []
        del built[len(built) - n :]
        if kind is dict:
            built.append(JsonObject(dict(zip(value, items, strict=True))))
        else:
            built.append(tuple(items))
    result = built[0]
    assert isinstance(result, JsonObject)  # narrowing: the root is an object
    return result
