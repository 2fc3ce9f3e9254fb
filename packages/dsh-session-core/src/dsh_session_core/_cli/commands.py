"""Every ``dsh-session`` command: the module that builds it, and its one-line help.

The top-level ``--help`` (and the error for an unknown command) is printed from this
table alone; a command's own parser, and its module, are built and imported only when
that command runs, so ``dsh-session --help`` costs little more than starting Python.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "HELP"]

#: Command name → (the module of this package whose ``add_commands`` adds it, its help).
#: In the order ``--help`` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "run a scripted agent session into a store and show its log"),
    "derive": ("logs", "print the messages derived from a log"),
    "repair": ("logs", "cut a log's torn tail and close its interrupted turn, durably"),
    "export": ("logs", "write a log or a stored session as JSONL, or as one JSON document"),
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
    "prune": ("lifecycle", "remove the sessions idle for longer than a duration"),
}

#: Command name → its one-line help (what each module passes to ``add_parser``).
HELP: dict[str, str] = {name: text for name, (_, text) in COMMANDS.items()}
