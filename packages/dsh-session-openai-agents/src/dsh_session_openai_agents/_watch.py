"""How a run that stopped without ending its turn is seen to have stopped.

The SDK tells a session nothing when a run raises (``MaxTurnsExceeded``, a model or
hook error) or is cancelled: the run's last batch was an ordinary step, and no call
follows. What the session does see is the task its calls come from and the run's
context (``wrapper``). So a run with its turn open is watched (:func:`watch`) for:

- the end of the task that saved its first items (``Runner.run`` runs in its caller's
  task, ``run_streamed`` in a task of its own): once it is done, so is the run, and
  whether it was cancelled tells a cancelled run from one that raised;
- its run context being garbage-collected (the run, its result and its exception all
  gone): for a task that lives on after its run raised.

Either calls ``on_stop(run, cancelled, on_loop)`` (``on_loop``: from the task's event
loop, between two of its steps). A run whose turn ends otherwise is unwatched
(:func:`unwatch`), so a long-lived task running many runs keeps no callback of theirs.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

from ._mapping import _Run

#: What a stopped run is reported to: the run, whether its task was cancelled, and
#: whether the call comes from the task's event loop.
OnStop = Callable[[_Run, bool, bool], None]


class _Watch:
    """What watches one run: the done callback on its task, the weak reference (with
    its callback) to its context."""

    __slots__ = ("callback", "context", "task")

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.callback: Callable[[asyncio.Task[Any]], None] | None = None
        self.context: weakref.ReferenceType[Any] | None = None


def watch(run: _Run, on_stop: OnStop) -> None:
    """Watch ``run`` (once), from a call of it on its event loop."""
    if run.watch is not None:
        return
    watching = run.watch = _Watch()
    try:
        task: asyncio.Task[Any] | None = asyncio.current_task()
    except RuntimeError:
        task = None
    if task is not None:
        def done(task: asyncio.Task[Any]) -> None:
            on_stop(run, task.cancelled(), True)

        task.add_done_callback(done)
        watching.task, watching.callback = task, done
    context = run.wrapper() if run.wrapper is not None else None
    if context is not None:
        # The callback holds the run, not its context (which is what it waits on).
        watching.context = weakref.ref(context, lambda _: on_stop(run, False, False))


def unwatch(run: _Run) -> None:
    """Stop watching ``run`` (its turn has ended): the context's callback is dropped
    with its reference; the task's is taken off when on the task's loop (from another
    thread it is left: it finds the run ended and does nothing)."""
    watching, run.watch = run.watch, None
    if not isinstance(watching, _Watch):
        return
    watching.context = None
    task, callback = watching.task, watching.callback
    if task is None or callback is None or task.done():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return
    if running is task.get_loop():
        task.remove_done_callback(callback)
