"""A run holds its session (issue 37, point 6): while the turn of a ``Runner.run`` is open
(from its first saved items to the batch that ends it), the ``DshSession`` running it
keeps the writer lock between the run's calls. Another writer (another process, another
instance of this process) waits up to its ``lock_timeout`` and then appends after the
run's turn, or is refused with a ``SessionLockedError`` saying a run holds the session;
it never closes the live run's turn as a crash's. A run that stops without its end
does not hold the session for ever: the end of the task running it ends its turn with
the reason it had (``error`` for ``MaxTurnsExceeded`` and errors, ``aborted`` when
cancelled), so does its run context being collected, and a killed process's lock goes
with it (its turn is then closed ``interrupted`` by crash repair, as a crash's).

Real SDK runs (the SDK's offline scripted model), real processes, a real ``SIGKILL``;
the run pauses inside its tool call until the test lets it go (a line on its stdin, an
``asyncio.Event``): no sleeps."""

from __future__ import annotations

import asyncio
import gc
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest
from agents import Agent, MaxTurnsExceeded, Runner, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from dsh_session_core import SessionLockedError, open_store, to_wire
from dsh_session_openai_agents import DshSession, _locks

# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

#: A process running one ``Runner.run`` whose tool call waits for a line on stdin: it
#: says "in-tool" when the run's first step (its call) is saved and the tool waits.
RUN = textwrap.dedent("""
    import asyncio, sys
    from agents import Agent, Runner, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
    from dsh_session_openai_agents import DshSession

    @function_tool
    async def weather(city: str) -> str:
        \"\"\"The weather in a city.\"\"\"
        print("in-tool", flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # until the test lets it go
        return f"sunny in {city}"

    async def main():
        session = DshSession("s", store=sys.argv[1], keep_open=sys.argv[2] == "1")
        model = ScriptedModel([
            ModelStep(output=[function_call("weather", {"city": "Oslo"}, call_id="c1")]),
            ModelStep(output=[assistant_message("Sunny in Oslo.")]),
        ])
        result = await Runner.run(Agent(name="a", model=model, tools=[weather]), "Oslo?",
                                  session=session)
        print("done", result.final_output, flush=True)
        await session.aclose()

    asyncio.run(main())
""")

#: Another worker: ``add_items`` of one user message, with the lock timeout given; it
#: says "trying" first, then "added", or "refused" and the error's message.
WRITE = textwrap.dedent("""
    import asyncio, sys
    from dsh_session_core import SessionLockedError
    from dsh_session_openai_agents import DshSession

    async def main():
        session = DshSession("s", store=sys.argv[1], lock_timeout=float(sys.argv[2]))
        print("trying", flush=True)
        try:
            await session.add_items([{"role": "user", "content": sys.argv[3]}])
            print("added", flush=True)
        except SessionLockedError as exc:
            print("refused", exc, flush=True)
        print(len(await session.get_items()), flush=True)
        await session.aclose()

    asyncio.run(main())
""")


def _write(store_url: str, timeout: float, text: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", WRITE, store_url, str(timeout), text],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _start_run(store_url: str, keep_open: bool) -> subprocess.Popen[str]:
    """The running process, once its run waits inside its tool call."""
    proc = subprocess.Popen([sys.executable, "-c", RUN, store_url, "1" if keep_open else "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != "in-tool\n":
        proc.kill()
        raise AssertionError(f"the run did not reach its tool: {line!r} {proc.communicate()}")
    return proc


def _events(store_url: str) -> list[dict[str, Any]]:
    """The log as stored (read without opening it: an open would close an open turn)."""
    with open_store(store_url) as store:
        return [to_wire(e) for e in store.read_session("s").events]


def _ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


def _user_texts(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]


@pytest.mark.parametrize("keep_open", [False, True], ids=["default", "keep_open"])
def test_another_process_waits_for_the_run_and_then_appends(
    store_url: str, keep_open: bool
) -> None:
    proc = _start_run(store_url, keep_open)
    try:
        refused = _write(store_url, 0, "too early")
        assert refused[1].startswith("refused"), refused
        assert "a run of the OpenAI Agents SDK holds its session" in refused[1]
        assert "lock_timeout" in refused[1]
        assert refused[2] == "1", refused  # reads are not held: the run's input, saved
        waiting = subprocess.Popen(
            [sys.executable, "-c", WRITE, store_url, "60", "after the run"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert waiting.stdout is not None
        assert waiting.stdout.readline() == "trying\n"
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = waiting.communicate(timeout=120)
        assert out.splitlines() == ["added", "5"], (out, err)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out == "done Sunny in Oslo.\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = _events(store_url)
    assert _ends(events) == [{"kind": "completed"}, {"kind": "completed"}]
    assert _user_texts(events) == ["Oslo?", "after the run"]
    run_end = next(i for i, e in enumerate(events) if e["type"] == "turn/end")
    assert events[run_end + 1]["type"] == "turn/start"  # the writer's turn: after it
    assert "too early" not in str(events)


def test_a_killed_run_lets_the_session_go_and_its_turn_is_repaired(store_url: str) -> None:
    proc = _start_run(store_url, False)
    try:
        refused = _write(store_url, 0, "while it runs")
        assert refused[1].startswith("refused"), refused
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert _write(store_url, 60, "after the kill")[1:] == ["added", "2"]
    events = _events(store_url)
    assert [r["kind"] for r in _ends(events)] == ["interrupted", "completed"]
    assert _user_texts(events) == ["Oslo?", "after the kill"]


MAX_TURNS = textwrap.dedent("""
    import asyncio, sys
    from agents import Agent, MaxTurnsExceeded, Runner, function_tool
    from agents.testing import ModelStep, ScriptedModel, function_call
    from dsh_session_openai_agents import DshSession

    @function_tool
    def weather(city: str) -> str:
        \"\"\"The weather in a city.\"\"\"
        return "sunny"

    looping = ScriptedModel([ModelStep(output=[function_call("weather", {"city": "P"},
                                                             call_id=f"m{k}")])
                             for k in range(4)])

    async def main():
        session = DshSession("s", store=sys.argv[1], keep_open=sys.argv[2] == "1")
        try:
            await Runner.run(Agent(name="a", model=looping, tools=[weather]), "loop",
                             session=session, max_turns=2)
        except MaxTurnsExceeded:
            print("max turns", flush=True)
        # Neither closed nor run again: the process ends here.

    asyncio.run(main())
""")


@pytest.mark.parametrize("keep_open", [False, True], ids=["default", "keep_open"])
def test_a_max_turns_run_in_a_process_that_ends_ends_with_error(
    store_url: str, keep_open: bool
) -> None:
    """The task running the run ends (``asyncio.run`` returns): the run's turn ends
    ``error`` there, before the process exits; not ``interrupted`` by the next load."""
    done = subprocess.run([sys.executable, "-c", MAX_TURNS, store_url,
                           "1" if keep_open else "0"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "max turns\n"
    ends = _ends(_events(store_url))
    assert len(ends) == 1
    assert ends[0]["kind"] == "error"
    assert ends[0]["code"] == "no-final-output"
    assert "max turns" in ends[0]["message"]
    assert _write(store_url, 0, "next")[1:] == ["added", "6"]
    assert [r["kind"] for r in _ends(_events(store_url))] == ["error", "completed"]


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _looping() -> Agent[Any]:
    return Agent(name="a", tools=[weather], model=ScriptedModel([
        ModelStep(output=[function_call("weather", {"city": "P"}, call_id=f"m{k}")])
        for k in range(4)]))


def _other_worker(store_url: str) -> DshSession:
    """Another worker of this process: its own store object."""
    return DshSession("s", store=store_url, lock_timeout=0)


def test_a_run_that_raised_in_a_request_task_lets_the_session_go_with_that_task(
    store_url: str,
) -> None:
    """A web worker's way: each request in a task of its own, a new ``DshSession``
    each. The run raises ``MaxTurnsExceeded``; when its request's task is done, the
    next request's write gets in at once and the run's turn ends ``error``."""

    served: list[DshSession] = []

    async def request() -> None:
        session = DshSession("s", store=store_url)
        served.append(session)  # closed after the test: the request leaves it open
        with pytest.raises(MaxTurnsExceeded):
            await Runner.run(_looping(), "loop", session=session, max_turns=2)

    async def main() -> None:
        await asyncio.create_task(request())
        # (Awaiting the task resumes this one before the task's other done callbacks
        # run, the one ending the run among them: a write waits for it, a moment.)
        other = DshSession("s", store=store_url, lock_timeout=60)
        await other.add_items([{"role": "user", "content": "next request"}])
        await other.aclose()
        await served[0].aclose()
        assert _locks._LOCKS == {}

    asyncio.run(main())
    events = _events(store_url)
    assert [r["kind"] for r in _ends(events)] == ["error", "completed"]
    assert _user_texts(events) == ["loop", "next request"]


def _join_enders() -> None:
    """Wait for the threads ending stopped runs (started from a garbage collection)."""
    for thread in threading.enumerate():
        if thread.name.startswith("dsh-session-openai-agents: end of a run"):
            thread.join(timeout=60)


def test_a_run_that_raised_in_a_task_that_lives_on_holds_until_its_context_is_gone(
    store_url: str,
) -> None:
    """The run raised in a task that goes on, which keeps the exception: the session
    stays held (the run's context lives on, in its run data); once that context is
    collected (the exception dropped), its turn ends ``error`` and the session goes."""

    async def main() -> None:
        session = DshSession("s", store=store_url)
        kept: list[MaxTurnsExceeded] = []
        try:
            await Runner.run(_looping(), "loop", session=session, max_turns=2)
        except MaxTurnsExceeded as exc:
            kept.append(exc)  # its run data holds the run's context
        other = _other_worker(store_url)
        with pytest.raises(SessionLockedError, match="a run of the OpenAI Agents SDK"):
            await other.add_items([{"role": "user", "content": "too early"}])
        kept.clear()
        # The context goes once nothing refers to it: the exception's traceback may hold
        # it in a cycle (a collection frees it), and a store's worker thread may still
        # hold the run's last call for a moment (a turn of the loop frees that).
        deadline = time.monotonic() + 60
        while True:
            gc.collect()
            _join_enders()
            try:
                await other.add_items([{"role": "user", "content": "after it"}])
                break
            except SessionLockedError:
                assert time.monotonic() < deadline, "the run's hold never ended"
                await asyncio.sleep(0.01)
        await other.aclose()
        await session.aclose()
        assert _locks._LOCKS == {}

    asyncio.run(main())
    events = _events(store_url)
    assert [r["kind"] for r in _ends(events)] == ["error", "completed"]
    assert _user_texts(events) == ["loop", "after it"]


def _paused_agent(started: asyncio.Event, go_on: asyncio.Event) -> Agent[Any]:
    @function_tool
    async def slow(city: str) -> str:
        """A tool that waits to be let go."""
        started.set()
        await go_on.wait()
        return f"sunny in {city}"

    return Agent(name="a", tools=[slow], model=ScriptedModel([
        ModelStep(output=[function_call("slow", {"city": "Oslo"}, call_id="c1")]),
        ModelStep(output=[assistant_message("Sunny in Oslo.")]),
    ]))


def test_a_cancelled_run_ends_aborted_and_lets_the_session_go(store_url: str) -> None:
    async def main() -> None:
        started, go_on = asyncio.Event(), asyncio.Event()
        session = DshSession("s", store=store_url)
        run = asyncio.create_task(Runner.run(_paused_agent(started, go_on), "Oslo?",
                                             session=session))
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        other = _other_worker(store_url)
        await other.add_items([{"role": "user", "content": "after the cancel"}])
        await other.aclose()
        await session.aclose()

    asyncio.run(main())
    events = _events(store_url)
    ends = _ends(events)
    assert ends[0]["kind"] == "aborted"
    assert "cancelled" in ends[0]["reason"]
    assert [r["kind"] for r in ends] == ["aborted", "completed"]
    assert _user_texts(events) == ["Oslo?", "after the cancel"]


@pytest.mark.parametrize("keep_open", [False, True], ids=["default", "keep_open"])
@pytest.mark.parametrize("same_store", [True, False], ids=["same-store", "other-store"])
def test_another_instance_of_this_process_waits_for_the_run(
    store_url: str, keep_open: bool, same_store: bool
) -> None:
    """Instances on one store object (which share its live session) and on another
    store object (whose writer lock is refused): either waits for the run's end (for
    the close of a ``keep_open`` session on another store object) and never closes its
    turn."""

    async def main() -> None:
        started, go_on = asyncio.Event(), asyncio.Event()
        session = DshSession("s", store=store_url, keep_open=keep_open)
        store: Any = session.store if same_store else store_url
        run = asyncio.create_task(Runner.run(_paused_agent(started, go_on), "Oslo?",
                                             session=session))
        await started.wait()
        hasty = DshSession("s", store=store, lock_timeout=0, keep_open=keep_open)
        with pytest.raises(SessionLockedError, match="a run of the OpenAI Agents SDK"):
            await hasty.add_items([{"role": "user", "content": "too early"}])
        with pytest.raises(SessionLockedError, match="a run of the OpenAI Agents SDK"):
            await hasty.pop_item()
        patient = DshSession("s", store=store, lock_timeout=60, keep_open=keep_open)
        waiting = asyncio.create_task(
            patient.add_items([{"role": "user", "content": "after the run"}]))
        for _ in range(20):  # let it start waiting: it must not get in meanwhile
            await asyncio.sleep(0)
        assert not waiting.done()
        go_on.set()
        result = await run
        assert result.final_output == "Sunny in Oslo."
        if keep_open and not same_store:
            # Kept open, the session stays held after the run: until it is closed.
            for _ in range(20):
                await asyncio.sleep(0)
            assert not waiting.done()
            await session.aclose()
        await waiting
        for instance in (hasty, patient, session):
            await instance.aclose()
        assert _locks._LOCKS == {}

    asyncio.run(main())
    events = _events(store_url)
    assert _ends(events) == [{"kind": "completed"}, {"kind": "completed"}]
    assert _user_texts(events) == ["Oslo?", "after the run"]


@pytest.mark.parametrize("keep_open", [False, True], ids=["default", "keep_open"])
def test_a_writer_waiting_for_a_lock_of_this_process_lets_its_holder_let_go(
    store_url: str, keep_open: bool
) -> None:
    """A write waiting for the writer lock of another store object of this process
    (a ``keep_open`` session, held until it is closed) waits without its turn on the
    session: the holder's ``aclose()``, which needs that turn to let go, is not kept
    waiting until the write gives up."""

    async def main() -> None:
        held = DshSession("s", store=store_url, keep_open=True)
        await held.add_items([{"role": "user", "content": "held"}])
        other = DshSession("s", store=store_url, lock_timeout=60, keep_open=keep_open)
        waiting = asyncio.create_task(
            other.add_items([{"role": "user", "content": "after the close"}]))
        await asyncio.sleep(0)  # the write has started: the lock is refused to it
        await held.aclose()
        await waiting
        await other.aclose()
        assert _locks._LOCKS == {}

    asyncio.run(main())
    assert _user_texts(_events(store_url)) == ["held", "after the close"]
