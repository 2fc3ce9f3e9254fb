"""How the run of one :class:`~._session.DshSession` holds its session (:class:`RunHold`):
marked held in this process's table of turns while the run's turn is open (the writes
of every other instance wait for it: :mod:`._locks`), the run watched for its stop
(:mod:`._watch`), and the turn of a run seen to stop ended where that is safe: on the
event loop's thread when no operation of the session runs, else in a thread of its own
that waits for one. The session's writer lock itself is kept by the session between
the run's calls (:meth:`~._session.DshSession._let_go`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from ._locks import _hold, _taking_turns_now, _turn_if_free, _Turns, _unhold
from ._mapping import Runs, _Run
from ._watch import unwatch, watch


class RunHold:
    """The hold of one instance's run on its session.

    :param runs: what the instance knows of its run (:class:`~._mapping.Runs`).
    :param key: the session's key in the table of turns (made on first use).
    :param end: ends the turn of a stopped run (``cancelled``: its task was), called
        with the session's turn had; a no-op when the run is no longer the open one.
    :param name: the session id, to name the thread that may end a run's turn.
    :param timeout: how long that thread waits for an operation of the session.
    """

    __slots__ = ("_end", "_key", "_name", "_runs", "_timeout", "_turns", "_watched")

    def __init__(self, runs: Runs, key: Callable[[], tuple[object, str]],
                 end: Callable[[_Run, bool], None], name: str, timeout: float) -> None:
        self._runs = runs
        self._key = key
        self._end = end
        self._name = name
        self._timeout = timeout
        self._turns: _Turns | None = None
        self._watched: _Run | None = None

    def settle(self, *, on_loop: bool) -> None:
        """After an operation (its turn on the session still had): watch the run whose
        turn it left open (from that run's event loop), unwatch one whose turn has
        ended, and mark the session held by this instance's run, or no longer."""
        run, watched = self._runs.run, self._watched
        if watched is not None and watched is not run:
            self._watched = None
            unwatch(watched)
        if run is not None and on_loop and self._watched is None:
            self._watched = run
            watch(run, self._stopped)
        if run is not None and self._turns is None:
            self._turns = _hold(self._key(), self)
        elif run is None and self._turns is not None:
            turns, self._turns = self._turns, None
            _unhold(self._key(), turns)

    def let_go(self) -> None:
        """At close: whatever became of its turn, no run of this instance holds the
        session any more (the other writers' waits end)."""
        self._runs.run = None
        self.settle(on_loop=False)

    def _stopped(self, run: _Run, cancelled: bool, on_loop: bool) -> None:
        """``run`` was seen to stop (:mod:`._watch`) with its turn maybe still open: end
        it (``error``; ``aborted`` when its task was cancelled) and let the session go.
        On the event loop's thread when no operation of the session is running (a
        task's done callback: before ``asyncio.run`` returns, before a request's task
        is gone), else in a thread of its own, which waits for the operation."""
        if self._runs.run is not run:
            return
        if on_loop:
            with _turn_if_free(self._key()) as had:
                if had:
                    self._ending(run, cancelled)
                    return
        # (At interpreter shutdown no thread starts: the writer lock goes with it.)
        with contextlib.suppress(RuntimeError):
            threading.Thread(target=self._ending_later, args=(run, cancelled),
                             name=f"dsh-session-openai-agents: end of a run "
                                  f"({self._name})").start()

    def _ending_later(self, run: _Run, cancelled: bool) -> None:
        with _taking_turns_now(self._key(), self._timeout):
            self._ending(run, cancelled)

    def _ending(self, run: _Run, cancelled: bool) -> None:
        try:
            self._end(run, cancelled)
        finally:
            self.settle(on_loop=False)
