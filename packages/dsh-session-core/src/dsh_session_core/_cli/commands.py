"""The table of ``dsh-session``'s commands, and of what the project's plugins add.

Every ``dsh-session`` command of core: the module that builds it, and its one-line
help; and what the project's own plugins add to the command line.

The top-level ``--help`` (and the error for an unknown command) is printed from these
tables; a command's own parser, and its module, are built and imported only when that
command runs, so ``dsh-session --help`` costs little more than starting Python.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "EXAMPLES", "HELP", "KNOWN_PLUGINS"]

#: Command name → (the module of this package whose ``add_commands`` adds it, its help).
#: In the order ``--help`` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "derive": ("logs", "print the messages derived from a log"),
    "repair": ("logs", "cut a log's torn tail and close its interrupted turn, durably"),
    "export": ("logs", "write a log or a stored session as JSONL, as one JSON document, or as "
                        "one HTML page"),
    "validate": ("logs", "check every event of logs against its registered schema"),
    "plugins": ("registry", "list the installed plugins"),
    "events": ("registry", "list every registered event type"),
    "ls": ("sessions", "list the sessions in a store"),
    "show": ("sessions", "a session's timeline, turn by turn"),
    "stats": ("sessions", "counts, sizes and tokens of a session's events"),
    "tail": ("sessions", "print a session's last events; with -f, follow it as it grows"),
    "fork": ("sessions",
             "create a child session seeded with a session's events up to a turn/end"),
    "copy": ("copy", "copy sessions between two stores (resumable, verified)"),
    "rm": ("lifecycle", "remove sessions from a store (refuses one a live writer holds)"),
    "forget": ("forget", "erase sessions for good: archived copies and what deletes leave "
                         "too (by id, or a person's: --label)"),
    "prune": ("retention", "remove the sessions a retention policy names (age, latest N, "
                           "size), archived first if asked"),
    "retain": ("retention", "mark sessions never to be pruned (--release: unmark)"),
    "rekey": ("rekey", "reseal an encrypted store's sessions under its current key"),
    "reindex": ("reindex", "rebuild a store's projection rows from its logs"),
    "search": ("search", "search the messages, tool calls and tool results of a store"),
}

#: Command name → its one-line help (what each module passes to ``add_parser``).
HELP: dict[str, str] = {name: text for name, (_, text) in COMMANDS.items()}

#: Command name → the example its ``--help`` ends with (a command that writes its own
#: epilog keeps it).
EXAMPLES: dict[str, str] = {
    "derive": "dsh-session derive --to anthropic chat-1 --store sqlite:///agent.db",
    "repair": "dsh-session repair --dry-run ~/logs/crashed.jsonl",
    "export": "dsh-session export chat-1 --store sqlite:///agent.db > chat-1.jsonl",
    "validate": "dsh-session validate --strict chat-1 chat-2 --store ~/sessions",
    "plugins": "dsh-session plugins --json",
    "events": "dsh-session events --markdown > docs/persistence-catalog.md",
    "ls": "dsh-session ls --store sqlite:///agent.db --json",
    "show": "dsh-session show chat-1 --store postgresql://db.internal/agents",
    "stats": "dsh-session stats --file ./chat-1.jsonl --json",
    "tail": "dsh-session tail -f -n 20 chat-1",
    "fork": "dsh-session fork chat-1 --turn 3 --as chat-1-retry",
    "copy": "dsh-session copy ~/sessions sqlite:///archive.db --dry-run",
    "rekey": "dsh-session rekey --all --store ~/sessions --key-env MY_KEYS",
    "reindex": "dsh-session reindex --all --store sqlite:///agent.db",
    "search": 'dsh-session search "rate limit" --type tool/result --since 7d',
}

#: What the project's own plugins add to the command line (their ``register_commands``),
#: by entry-point name: (their distribution, their commands with their one-line help,
#: their ``export`` formats). Data, not an import: core imports no other distribution.
#: ``dsh-session --help`` lists an installed one's commands from here without loading
#: any plugin (when every installed plugin is one of these: any other is loaded, to ask
#: it), and a command or format of one that is not installed says what to install. A
#: test holds each plugin to its row.
KNOWN_PLUGINS: dict[str, tuple[str, dict[str, str], tuple[str, ...]]] = {
    "adk": ("dsh-session-adk", {}, ()),
    "claude-agent": ("dsh-session-claude-agent", {}, ()),
    "compact": ("dsh-session-compact", {}, ()),
    "demo": ("dsh-session", {
        "demo": "run a scripted agent session into a store and show its log"}, ()),
    "hooks": ("dsh-session-hooks", {}, ()),
    "langgraph": ("dsh-session-langgraph", {}, ()),
    "mode": ("dsh-session-mode", {}, ()),
    "openai-agents": ("dsh-session-openai-agents", {}, ()),
    "pydantic-ai": ("dsh-session-pydantic-ai", {}, ()),
    "todo": ("dsh-session-todo", {}, ()),
    "view": ("dsh-session-view", {
        "view": "browse a store's sessions in a local web page (read-only)"}, ("html",)),
}
