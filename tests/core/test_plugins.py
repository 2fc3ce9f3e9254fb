"""Plugin discovery and the hook machinery (issue acceptance): a factory with no
import-time side effects loads the entry-point group; a block list (argument and
environment variable) disables plugins by name; two distributions using one entry-point
name fail naming both; ``session_event`` takes no wrappers and its listener list follows
registrations; ``session_flush`` runs every implementation.

Entry points are faked by replacing the factory's entry-point scan
(``dsh_session_core._plugins.manager.find_entry_points``, which reads ``entry_points.txt`` files
on ``sys.path``): no
in-repo plugin is installed yet, and a real third-party distribution is tested elsewhere.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterable, Iterator

import msgspec
import pluggy
import pytest

import dsh_session_core
import dsh_session_core._plugins.manager as plugins_module
from dsh_session_core import (
    ENTRY_POINT_GROUP,
    Event,
    EventSpec,
    PluginManager,
    Session,
    SessionStore,
    create_plugin_manager,
    hookimpl,
)
from dsh_session_core._plugins.manager import PluginHooks
from dsh_session_core.errors import PluginConflictError, PluginError

DISABLE_PLUGINS = "DSH_SESSION_DISABLE_PLUGINS"
DISABLE_AUTOLOAD = "DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD"


# --- a plugin to be found through an entry point -------------------------------------------


class EchoData(msgspec.Struct, frozen=True, kw_only=True):
    text: str


class Echo(Event, tag="test/echo", frozen=True):
    """Something a test plugin says back."""

    data: EchoData


class EchoPlugin:
    @hookimpl
    def register_event_types(self) -> Iterable[EventSpec]:
        return [EventSpec(Echo)]


class Quiet:
    """A plugin with no hook implementations."""


# --- fake installed distributions ------------------------------------------------------------


@dataclasses.dataclass
class FakeEntryPoint:
    name: str
    group: str
    plugin: object
    dist: FakeDist | None = None
    loads: int = 0

    @property
    def value(self) -> str:
        return f"fake_{self.name}:plugin"

    @property
    def distribution(self) -> str:
        return self.dist.name if self.dist is not None else ""

    @property
    def version(self) -> str:
        return self.dist.version if self.dist is not None else ""

    def load(self) -> object:
        self.loads += 1
        return self.plugin


@dataclasses.dataclass
class FakeDist:
    name: str
    entry_points: list[FakeEntryPoint]
    version: str = "1.0"

    def __post_init__(self) -> None:
        for ep in self.entry_points:
            ep.dist = self

    @property
    def metadata(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version}


@dataclasses.dataclass
class Installed:
    """What the entry-point scan reports while a test runs."""

    dists: list[FakeDist]
    entry_point_calls: int = 0

    def entry_points(self, group: str) -> list[FakeEntryPoint]:
        self.entry_point_calls += 1
        return [ep for d in self.dists for ep in d.entry_points if ep.group == group]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DISABLE_PLUGINS, raising=False)
    monkeypatch.delenv(DISABLE_AUTOLOAD, raising=False)


Install = Callable[..., Installed]


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Install:
    def _install(*dists: FakeDist) -> Installed:
        installed = Installed(list(dists))
        monkeypatch.setattr(plugins_module, "find_entry_points", installed.entry_points)
        return installed

    return _install


def ep(name: str, plugin: object, group: str = ENTRY_POINT_GROUP) -> FakeEntryPoint:
    return FakeEntryPoint(name, group, plugin)


# --- the factory ------------------------------------------------------------------------------


def test_factory_loads_the_entry_point_group(install: Install) -> None:
    echo = EchoPlugin()
    elsewhere = ep("stray", Quiet(), group="someone.else")
    install(FakeDist("dsh-session-echo", [ep("echo", echo), elsewhere]))
    pm = create_plugin_manager()
    assert pm.get_plugin("echo") is echo
    assert pm.has_plugin("core")
    assert not pm.has_plugin("stray")
    assert elsewhere.loads == 0
    # The entry-point name is the plugin's identity, down to the registry's provenance.
    assert SessionStore(pm).registry.plugin_for("test/echo") == "echo"


def test_autoload_off_reads_no_entry_point(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = install(FakeDist("dsh-session-echo", [ep("echo", EchoPlugin())]))
    assert not create_plugin_manager(autoload=False).has_plugin("echo")
    monkeypatch.setenv(DISABLE_AUTOLOAD, "1")
    assert not create_plugin_manager().has_plugin("echo")
    assert installed.entry_point_calls == 0
    assert installed.dists[0].entry_points[0].loads == 0


def test_block_list_argument(install: Install) -> None:
    echo = ep("echo", EchoPlugin())
    install(
        FakeDist("dsh-session-echo", [echo]), FakeDist("dsh-session-quiet", [ep("quiet", Quiet())])
    )
    pm = create_plugin_manager(blocked=["echo"])
    assert pm.is_blocked("echo")
    assert not pm.has_plugin("echo")
    assert echo.loads == 0  # not even imported
    assert pm.has_plugin("quiet")
    assert "test/echo" not in SessionStore(pm).registry


def test_block_list_environment_variable(install: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    install(
        FakeDist("dsh-session-echo", [ep("echo", EchoPlugin())]),
        FakeDist("dsh-session-quiet", [ep("quiet", Quiet())]),
        FakeDist("dsh-session-other", [ep("other", Quiet())]),
    )
    from dsh_session_core._plugins import manager as _plugins
    from dsh_session_core.errors import UnknownPluginWarning

    monkeypatch.setattr(_plugins, "_WARNED", set())
    monkeypatch.setenv(DISABLE_PLUGINS, " nothing, echo ,")
    # A name no installed plugin has is warned about, once per process.
    with pytest.warns(UnknownPluginWarning, match="'nothing', which no installed plugin is "
                      r"\(installed: echo, other, quiet\)"):
        pm = create_plugin_manager()
    assert not pm.has_plugin("echo")
    assert pm.has_plugin("quiet")
    # The argument adds to the variable.
    pm = create_plugin_manager(blocked=["quiet"])
    assert not pm.has_plugin("echo")
    assert not pm.has_plugin("quiet")
    assert pm.has_plugin("other")


def test_entry_point_name_clash_names_both_distributions(install: Install) -> None:
    first, second = ep("echo", EchoPlugin()), ep("echo", Quiet())
    install(FakeDist("dsh-session-echo-b", [first]), FakeDist("dsh-session-echo-a", [second]))
    with pytest.raises(PluginConflictError) as info:
        create_plugin_manager()
    err = info.value
    assert isinstance(err, RuntimeError)
    assert err.name == "echo"
    assert set(err.distributions) == {"dsh-session-echo-a", "dsh-session-echo-b"}
    assert "'dsh-session-echo-a'" in str(err)
    assert "'dsh-session-echo-b'" in str(err)
    assert "'echo'" in str(err)
    assert first.loads == second.loads == 0  # refused before anything is imported
    # Blocking the contested name is the way out.
    assert not create_plugin_manager(blocked=["echo"]).has_plugin("echo")


def test_one_distribution_seen_twice_is_no_clash(install: Install) -> None:
    # e.g. the same distribution found on two sys.path entries
    echo = EchoPlugin()
    install(
        FakeDist("dsh-session-echo", [ep("echo", echo)]),
        FakeDist("dsh-session-echo", [ep("echo", echo)]),
    )
    assert create_plugin_manager().get_plugin("echo") is echo


# --- no import-time side effects ------------------------------------------------------------


def test_importing_the_package_loads_no_entry_point() -> None:
    code = textwrap.dedent(
        """
        import importlib.metadata as md
        import dsh_session_core._plugins.entry_points as scan

        def refuse(*args, **kwargs):
            raise AssertionError("entry points read at import time")

        md.entry_points = md.distributions = scan.find_entry_points = refuse
        import dsh_session_core
        import dsh_session_core.errors, dsh_session_core.events, dsh_session_core.hookspecs
        import dsh_session_core.invariants, dsh_session_core.vocabulary
        print("imported")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"


def test_the_factory_is_what_reads_entry_points(install: Install) -> None:
    installed = install(FakeDist("dsh-session-echo", [ep("echo", EchoPlugin())]))
    assert not any(isinstance(v, pluggy.PluginManager) for v in vars(dsh_session_core).values())
    assert installed.entry_point_calls == 0
    create_plugin_manager()
    assert installed.entry_point_calls == 1


# --- session_event: plain listeners only, recomputed on change --------------------------------


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    @hookimpl
    def session_event(self, session: Session, event: Event) -> None:
        self.seen.append((session.id, event.seq))


class NewStyleWrapper:
    @hookimpl(wrapper=True)
    def session_event(self, session: Session, event: Event) -> Iterator[None]:
        return (yield)


class OldStyleWrapper:
    @hookimpl(hookwrapper=True)
    def session_event(self, session: Session, event: Event) -> Iterator[None]:
        yield


@pytest.mark.parametrize("wrapper", [NewStyleWrapper, OldStyleWrapper])
def test_session_event_wrappers_are_refused_at_store_build(
    pm: PluginManager, wrapper: type
) -> None:
    pm.register(wrapper(), name="wrapping")
    with pytest.raises(PluginError, match=r"'wrapping' wraps session_event"):
        SessionStore(pm)


def test_listener_list_is_recomputed_after_register(pm: PluginManager) -> None:
    hooks = PluginHooks(pm)
    before = hooks.session_event_listeners()
    assert before == ()
    assert hooks.session_event_listeners() is before  # cached while nothing changed
    first, second = Recorder(), Recorder()
    pm.register(first, name="first")
    assert hooks.session_event_listeners() == (("first", first.session_event),)
    pm.register(second, name="second")
    # pluggy's order: the last registered is called first.
    assert [name for name, _ in hooks.session_event_listeners()] == ["second", "first"]
    pm.unregister(name="first")
    assert hooks.session_event_listeners() == (("second", second.session_event),)


def test_a_listener_registered_after_the_store_is_called(pm: PluginManager) -> None:
    store = SessionStore(pm, foreign_types=["compaction/marker"])
    session = store.create("s")
    session.append("compaction/marker", {"n": 0})
    recorder = Recorder()
    pm.register(recorder)
    session.append("compaction/marker", {"n": 1})
    assert recorder.seen == [("s", 1)]


# --- session_flush --------------------------------------------------------------------------


@dataclasses.dataclass
class Flusher:
    log: list[str]
    name: str
    error: Exception | None = None

    @hookimpl
    def session_flush(self, session: Session) -> None:
        self.log.append(self.name)
        if self.error is not None:
            raise self.error


@dataclasses.dataclass
class AsyncFlusher:
    log: list[str]
    name: str
    error: Exception | None = None

    @hookimpl
    async def session_flush(self, session: Session) -> None:
        # Runs only when awaited: the log shows that aflush awaited it.
        self.log.append(self.name)
        if self.error is not None:
            raise self.error


def test_flush_runs_every_implementation_when_one_raises(pm: PluginManager) -> None:
    log: list[str] = []
    boom = ValueError("disk full")
    pm.register(Flusher(log, "a", boom), name="a")
    pm.register(Flusher(log, "b"), name="b")
    store = SessionStore(pm)
    session = store.create()
    with pytest.raises(ValueError, match="disk full") as info:
        store.flush(session)
    assert info.value is boom
    assert sorted(log) == ["a", "b"]
    assert any("'a'" in note for note in getattr(info.value, "__notes__", []))


def test_flush_gathers_several_failures(pm: PluginManager) -> None:
    log: list[str] = []
    pm.register(Flusher(log, "a", ValueError("a failed")), name="a")
    pm.register(Flusher(log, "b"), name="b")
    pm.register(Flusher(log, "c", KeyError("c failed")), name="c")
    store = SessionStore(pm)
    with pytest.raises(ExceptionGroup) as info:
        store.flush(store.create())
    assert sorted(log) == ["a", "b", "c"]
    assert {type(e) for e in info.value.exceptions} == {ValueError, KeyError}


def test_flush_with_nothing_failing_returns(pm: PluginManager) -> None:
    log: list[str] = []
    pm.register(Flusher(log, "a"), name="a")
    store = SessionStore(pm)
    store.flush(store.create())
    assert log == ["a"]


def test_aflush_awaits_async_implementations(pm: PluginManager) -> None:
    log: list[str] = []
    pm.register(Flusher(log, "sync"), name="sync")
    pm.register(AsyncFlusher(log, "async"), name="async")
    store = SessionStore(pm)
    session = store.create()
    asyncio.run(store.aflush(session))
    assert sorted(log) == ["async", "sync"]


def test_aflush_raises_after_every_implementation_ran(pm: PluginManager) -> None:
    log: list[str] = []
    pm.register(AsyncFlusher(log, "bad", OSError("gone")), name="bad")
    pm.register(AsyncFlusher(log, "good"), name="good")
    pm.register(Flusher(log, "sync"), name="sync")
    store = SessionStore(pm)
    with pytest.raises(OSError, match="gone"):
        asyncio.run(store.aflush(store.create()))
    assert sorted(log) == ["bad", "good", "sync"]


def test_sync_flush_refuses_an_async_implementation(pm: PluginManager) -> None:
    log: list[str] = []
    pm.register(AsyncFlusher(log, "async"), name="async")
    pm.register(Flusher(log, "sync"), name="sync")
    store = SessionStore(pm)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match="aflush"):
            store.flush(store.create())
        gc.collect()
    assert log == ["sync"]  # the coroutine was closed, never run
    assert not [w for w in caught if "never awaited" in str(w.message)]
