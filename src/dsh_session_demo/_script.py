"""The scripted session: what the user asks, what the model answers, what the tools say.

Six turns on one session (a bug hunt with a failing test run and a steering message; an
idle-time context injection; a prompt a hook blocks; a plan-mode round trip with todos
and an edit; a turn cut short by a crash; the turn that resumes after it, compacting
the oldest turns first), plus one turn on a fork taken after turn 4. The functions here
only say *what* happens; :class:`~._harness.Harness` logs it the way a loop would.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import ToolOutcome
from dsh_session_mode import APPROVE_LABEL, Question, QuestionAnswer

from ._harness import Call, Harness, Text, Thinking
from ._texts import FIXED_LOADER, LOADER_PY, PYTEST_FAIL, PYTEST_PASS

__all__ = [
    "approve_plan",
    "before_the_fork",
    "guard_prompt",
    "interrupted_turn",
    "on_the_fork",
    "resumed_prompt",
    "resumed_turn",
]

LOADER = "src/config/loader.py"
TESTS = "tests/test_loader.py"
PYTEST = "pytest -q tests/test_loader.py"
REGRESSION_TEST = (
    "\n\ndef test_empty_file_is_an_empty_layer(tmp_path):\n"
    '    (tmp_path / "local.toml").write_text("")\n'
    '    assert load_all([tmp_path / "local.toml"]) == DEFAULTS\n'
)
PLAN = (
    "# Fix: empty config files\n\n"
    "1. `load()` returns `{}` for a blank file instead of `None`.\n"
    "2. Add `test_empty_file_is_an_empty_layer` to tests/test_loader.py.\n"
    f"3. Run `{PYTEST}`."
)
TODO_FIX = "Return {} for empty config files"
TODO_TEST = "Add a regression test for empty files"
TODO_RUN = "Run the loader tests"


def guard_prompt(prompt: str) -> tuple[int, str, str]:
    """The ``UserPromptSubmit`` hook ``hooks/guard-prompt.sh``, simulated: it refuses
    prompts that ask to delete tests (exit 2, the reason on stderr) and passes the rest
    (exit 0, no output)."""
    words = prompt.lower()
    if "delete" in words and "test" in words:
        return 2, "", "Blocked by hooks/guard-prompt.sh: deleting tests is not allowed here.\n"
    return 0, "", ""


def approve_plan(question: Question) -> Iterable[QuestionAnswer]:
    """The user's answer to the plan review: approve, with a note."""
    return [QuestionAnswer(id=question.id, selected=(APPROVE_LABEL,),
                           custom="Keep the change small.")]


def _todos(fix: str, test: str, run: str) -> list[dict[str, str]]:
    return [{"content": TODO_FIX, "status": fix}, {"content": TODO_TEST, "status": test},
            {"content": TODO_RUN, "status": run}]


def before_the_fork(h: Harness) -> None:
    """Turns 1-4: investigate, a context injection, a blocked prompt, plan and fix."""
    # Turn 1: read the code, run the tests (they fail), explain. The user steers
    # between steps.
    h.begin_turn()
    h.submit("The service crashes at start-up when one of its config files is empty. "
             "Can you find out why?")
    h.step(Text("Let me read the config loader first."),
           Call("read", {"path": LOADER}, ToolOutcome(LOADER_PY)))
    h.steer("The empty file is config/local.toml, if that helps.")
    h.step(Text("`load()` returns None for an empty file. Let me reproduce the crash."),
           Call("bash", {"command": PYTEST}, ToolOutcome(PYTEST_FAIL, is_error=True),
                error_code="EXIT_1", runtime_ms=1_800))
    h.step(Thinking("merge() calls dict.update(None) for the empty layer."),
           Text("Found it: `load()` returns `None` for an empty file such as "
                "config/local.toml, and `merge()` then calls `dict.update(None)`, which "
                "raises `TypeError`. Returning `{}` for an empty file fixes it."))
    h.end_turn()

    # Turn 2: while the session idles, a file watcher injects a notice in its own turn.
    h.clock.wait(45_000)
    h.begin_turn(injected_by="file-watch")
    h.inject_context("config/local.toml changed on disk (0 -> 2 lines) outside this "
                     "session.", "file-watch")
    h.step(Text("Noted: config/local.toml is no longer empty, but the bug still affects "
                "any empty layer."))
    h.end_turn()

    # Turn 3: the prompt hook refuses this prompt; no step runs.
    h.clock.wait(30_000)
    h.begin_turn()
    h.submit("Just delete the tests directory so that CI goes green.")

    # Turn 4: the user switches to plan mode first; the switch is logged at turn start.
    h.clock.wait(20_000)
    h.modes.set(h.session, "plan")
    h.begin_turn()
    h.submit("Plan the fix before changing anything.")
    h.step(Thinking("Plan mode is read-only: record the tasks, then present the plan."),
           Call("todo_write", {"todos": _todos("in_progress", "pending", "pending")}))
    h.step(Call("exit_plan_mode", {"plan": PLAN}, runtime_ms=8_000))
    h.step(Text("Plan approved. Applying step 1."),
           Call("edit", {"path": LOADER, "old": "        return None  # an empty file has "
                         "no settings", "new": FIXED_LOADER},
                ToolOutcome(f"Edited {LOADER}: 1 replacement.")))
    h.step(Text("`load()` now treats an empty file as an empty layer. Next: the "
                "regression test."))
    h.end_turn()


def on_the_fork(h: Harness) -> None:
    """The fork's own turn 5: another way to fix it, explored on the side."""
    h.clock.wait(15_000)
    h.begin_turn()
    h.submit("Alternative: skip empty layers in load_all() instead. Sketch it.")
    h.step(Text("On this branch I would filter them out: `merge(*(layer for layer in "
                "map(load, paths) if layer))`, and leave `load()` as it was."))
    h.end_turn()


def interrupted_turn(h: Harness) -> int:
    """Turn 5, run in a child process that is killed before the turn ends.

    The harness flushes once mid-turn (a checkpoint before running a tool), so the log
    on disk ends with a tool call that has no result; what the child appends after the
    checkpoint is never flushed and dies with it.

    :returns: how many events were durable when the child stopped flushing.
    """
    durable = 0

    def checkpoint() -> None:
        nonlocal durable
        h.store.flush(h.session)
        durable = h.session.seq

    h.begin_turn()
    h.submit("Now add the regression test and run the loader tests.")
    h.step(Call("todo_write", {"todos": _todos("completed", "in_progress", "pending")}))
    h.step(Text("Adding the regression test."),
           Call("edit", {"path": TESTS, "old": "", "new": REGRESSION_TEST},
                ToolOutcome(f"Edited {TESTS}: appended 4 lines.")),
           before_tools=checkpoint)
    h.start_step()
    h.respond([Text("Running the loader tests now."), Call("bash", {"command": PYTEST})],
              cut_after=4)
    return durable


def resumed_turn(h: Harness) -> None:
    """The rest of turn 6, once the oldest turns are compacted: redo, test, finish."""
    h.step(Call("edit", {"path": TESTS, "old": "", "new": REGRESSION_TEST},
                ToolOutcome(f"Edited {TESTS}: appended 4 lines.")))
    h.step(Call("bash", {"command": PYTEST}, ToolOutcome(PYTEST_PASS), runtime_ms=1_600),
           Call("todo_write", {"todos": _todos("completed", "completed", "completed")}))
    h.step(Text("Done: empty config files are empty layers now, the regression test "
                "covers it, and the loader tests pass (3 passed)."))
    h.end_turn()


def resumed_prompt(h: Harness) -> None:
    """The start of turn 6: the user's retry after the interrupted turn."""
    h.clock.wait(60_000)
    h.begin_turn()
    h.submit("You were cut off. Add the regression test again, then run the tests.")
