"""The demo's fixed material: the fictional project, its prompts, tool outputs and the
request header the scripted agent works under.

Everything the scripted model "says" and every tool output is a constant here, so the
log the demo writes is the same on every run (the clock and the ids are fixed too).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "BASE_SYSTEM",
    "CWD",
    "FIXED_LOADER",
    "LOADER_PY",
    "MODEL",
    "PYTEST_FAIL",
    "PYTEST_PASS",
    "START_MS",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
]

#: The session's working directory. Fixed (not the caller's cwd) so that two runs write
#: the same header and land in the same JSONL bucket wherever they are started from.
CWD: Final = "/demo/workspace"

#: 2026-01-01T09:00:00Z: where the demo's clock starts.
START_MS: Final = 1_767_258_000_000

MODEL: Final = "scripted-demo-model"

BASE_SYSTEM: Final = (
    "You are a coding agent working in /demo/workspace, a small Python service.\n"
    "Use the tools to inspect and change files. Keep answers short."
)


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


#: The tools offered to the model, in order; plan mode narrows the list.
TOOL_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "read": {"name": "read", "description": "Read a file of the workspace.",
             "parameters": _schema(path="string")},
    "bash": {"name": "bash", "description": "Run a shell command in the workspace.",
             "parameters": _schema(command="string")},
    "edit": {"name": "edit", "description": "Replace one exact snippet of a file.",
             "parameters": _schema(path="string", old="string", new="string")},
    "todo_write": {"name": "todo_write", "description": "Replace the task list.",
                   "parameters": _schema(todos="array")},
    "exit_plan_mode": {"name": "exit_plan_mode",
                       "description": "Present the plan for the user's review.",
                       "parameters": _schema(plan="string")},
}
TOOL_NAMES: Final = tuple(TOOL_SCHEMAS)

LOADER_PY: Final = '''"""Load layered configuration files."""

import tomllib
from pathlib import Path

DEFAULTS = {"log_level": "info", "workers": 4}


def load(path: Path) -> dict | None:
    text = path.read_text()
    if not text.strip():
        return None  # an empty file has no settings
    return tomllib.loads(text)


def merge(*layers: dict) -> dict:
    merged = dict(DEFAULTS)
    for layer in layers:
        merged.update(layer)
    return merged


def load_all(paths: list[Path]) -> dict:
    return merge(*(load(p) for p in paths))
'''

FIXED_LOADER: Final = "        return {}  # an empty file is an empty layer"

PYTEST_FAIL: Final = """Command exited with status 1
F.                                                                  [100%]
=================================== FAILURES ===================================
_______________________________ test_empty_layer _______________________________
    def test_empty_layer(tmp_path):
        (tmp_path / "local.toml").write_text("")
>       load_all([tmp_path / "local.toml"])
src/config/loader.py:24: in load_all
    return merge(*(load(p) for p in paths))
src/config/loader.py:19: in merge
    merged.update(layer)
E   TypeError: 'NoneType' object is not iterable
1 failed, 1 passed in 0.04s"""

PYTEST_PASS: Final = """Command exited with status 0
...                                                                  [100%]
3 passed in 0.05s"""
