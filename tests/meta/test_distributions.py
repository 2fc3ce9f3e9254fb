"""The installable shape: seven wheels, each installed alone into a fresh virtual environment.

``dsh-session-core`` alone must work on its own (the 15 core event types, a log of absent
plugins' events loaded, derived and round-tripped, ``validate --strict`` naming what to
install); core plus one plugin must show that plugin's events and no other's; and
``dsh-session`` must bring core, the four plugins, the viewer and the demo, and nothing of
the development environment. The wheels are built from the workspace as a release would
build them, and installed from files, not from the source tree.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import msgspec
import pytest

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = {
    "dsh-session-core": ROOT / "packages" / "dsh-session-core",
    "dsh-session-compact": ROOT / "packages" / "dsh-session-compact",
    "dsh-session-hooks": ROOT / "packages" / "dsh-session-hooks",
    "dsh-session-mode": ROOT / "packages" / "dsh-session-mode",
    "dsh-session-todo": ROOT / "packages" / "dsh-session-todo",
    "dsh-session-view": ROOT / "packages" / "dsh-session-view",
    "dsh-session": ROOT,
}
PLUGIN_NAMESPACES = {"compact": "compact", "hooks": "hook", "mode": "mode", "todo": "todo"}

#: The core vocabulary, as the seeds name it (spec §2): not read from the code.
CORE_TYPES = {
    "turn/start", "turn/end", "step/start", "step/end", "user/message",
    "assistant/message", "assistant/chunk", "tool/call", "tool/result",
    "tool/code-dispatch", "context/message", "steering/message", "prompt/blocked",
    "request/header", "request/header-delta",
    # core's own: the retention ledger's
    "retention/mark", "retention/removing", "retention/removal", "retention/abandoned",
    "retention/forgetting",
    "retention/forgotten",
}

#: Variables of the development environment that must not leak into the fresh ones.
_DROPPED = ("PYTHONPATH", "VIRTUAL_ENV", "DSH_SESSION_STORE", "DSH_SESSION_DISABLE_PLUGINS")


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _DROPPED}


def _wheel_name(distribution: str) -> str:
    return distribution.replace("-", "_") + "-"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every distribution's wheel, built from its folder (no build isolation: the
    development environment has the build backend, and the run needs no network)."""
    out = tmp_path_factory.mktemp("wheels")
    for folder in MEMBERS.values():
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(folder)],
            check=True, capture_output=True, env=_environ(),
        )
    built = {}
    for distribution in MEMBERS:
        [wheel] = out.glob(_wheel_name(distribution) + "[0-9]*.whl")
        built[distribution] = wheel
    return built


class Env:
    """A fresh virtual environment with some of the wheels installed."""

    def __init__(self, path: Path, wheels: list[Path]) -> None:
        venv.EnvBuilder(with_pip=False).create(path)
        self.python = str(path / "bin" / "python")
        self.bin = path / "bin"
        # The test environment's pip installs into it (--python): no pip of its own.
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", self.python, "install", "--quiet",
             "--disable-pip-version-check", *map(str, wheels)],
            check=True, capture_output=True, env=_environ(),
        )

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``dsh-session ARGS`` in this environment."""
        proc = subprocess.run([str(self.bin / "dsh-session"), *args], capture_output=True,
                              text=True, env=_environ(), check=False)
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def python_code(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.python, "-c", code], capture_output=True, text=True,
                              env=_environ(), check=False)

    def distributions(self) -> set[str]:
        out = self.python_code(
            "import importlib.metadata as m\n"
            "print('\\n'.join(sorted(d.metadata['Name'] for d in m.distributions())))"
        )
        return set(out.stdout.split())


@pytest.fixture(scope="module")
def batteries(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Env:
    """``pip install dsh-session``: the seven wheels."""
    return Env(tmp_path_factory.mktemp("venv") / "batteries", list(wheels.values()))


@pytest.fixture(scope="module")
def core_alone(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Env:
    """``pip install dsh-session-core``."""
    return Env(tmp_path_factory.mktemp("venv") / "core", [wheels["dsh-session-core"]])


@pytest.fixture(scope="module")
def core_and_compact(tmp_path_factory: pytest.TempPathFactory,
                     wheels: dict[str, Path]) -> Env:
    """``pip install dsh-session-core dsh-session-compact``."""
    return Env(tmp_path_factory.mktemp("venv") / "compact",
               [wheels["dsh-session-core"], wheels["dsh-session-compact"]])


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory: pytest.TempPathFactory, batteries: Env) -> Path:
    """The demo's session log, written by the batteries-included install: it holds
    events of all four plugins (compaction, hooks, plan mode, todos)."""
    store = tmp_path_factory.mktemp("demo-store")
    batteries.run("demo", "--store", str(store), "--json")
    [log] = [p for p in store.rglob("demo.jsonl")]
    return log


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        [name] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(name).decode())


def _entry_points(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        return z.read(names[0]).decode() if names else ""


def _requirement_names(meta: email.message.Message) -> set[str]:
    """The names of a wheel's unconditional requirements."""
    names = set()
    for req in meta.get_all("Requires-Dist") or []:
        if ";" in req:
            continue  # an extra's
        names.add(req.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip())
    return names


# --- the wheels themselves ---------------------------------------------------------------


def test_every_wheel_carries_the_license_and_says_what_it_needs(
    wheels: dict[str, Path],
) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    for distribution, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as z:
            licenses = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
            assert len(licenses) == 1, distribution
            assert z.read(licenses[0]).decode() == license_text, distribution
            assert any(n.endswith("/py.typed") for n in z.namelist()) or (
                distribution == "dsh-session"), distribution
        meta = _metadata(wheel)
        assert meta["Name"] == distribution
        assert meta["Requires-Python"] == ">=3.11"
        assert meta["License-Expression"] == "MIT"
        classifiers = meta.get_all("Classifier") or []
        assert "Operating System :: POSIX" in classifiers, distribution
        assert "Typing :: Typed" in classifiers, distribution
        urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
        assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls), distribution


def test_core_depends_on_msgspec_and_pluggy_only(wheels: dict[str, Path]) -> None:
    meta = _metadata(wheels["dsh-session-core"])
    assert _requirement_names(meta) == {"msgspec", "pluggy"}
    assert meta.get_all("Provides-Extra") == ["encryption", "postgresql", "redis", "zstd"]
    points = _entry_points(wheels["dsh-session-core"])
    assert "dsh_session.plugins" not in points  # core is built in, not an entry point
    assert "dsh-session = dsh_session_core._cli.main:main" in points


def test_each_plugin_depends_on_core_only_and_registers_itself(
    wheels: dict[str, Path],
) -> None:
    for plugin in PLUGIN_NAMESPACES:
        wheel = wheels[f"dsh-session-{plugin}"]
        assert _requirement_names(_metadata(wheel)) == {"dsh-session-core"}, plugin
        points = _entry_points(wheel)
        assert f"[dsh_session.plugins]\n{plugin} = dsh_session_{plugin}.plugin" in points
        assert "console_scripts" not in points, plugin
        with zipfile.ZipFile(wheel) as z:
            packages = {n.split("/")[0] for n in z.namelist() if "dist-info" not in n}
        assert packages == {f"dsh_session_{plugin}"}, plugin


def test_the_batteries_distribution_is_core_the_four_plugins_and_the_demo(
    wheels: dict[str, Path],
) -> None:
    meta = _metadata(wheels["dsh-session"])
    assert _requirement_names(meta) == {
        "dsh-session-core", "dsh-session-compact", "dsh-session-hooks",
        "dsh-session-mode", "dsh-session-todo", "dsh-session-view",
    }
    with zipfile.ZipFile(wheels["dsh-session"]) as z:
        packages = {n.split("/")[0] for n in z.namelist() if "dist-info" not in n}
    assert packages == {"dsh_session_demo"}
    # The demo adds `dsh-session demo` as a plugin: core imports nothing of it.
    points = _entry_points(wheels["dsh-session"])
    assert "[dsh_session.plugins]\ndemo = dsh_session_demo.plugin" in points


def test_the_viewer_depends_on_core_only_and_ships_its_page(wheels: dict[str, Path]) -> None:
    wheel = wheels["dsh-session-view"]
    assert _requirement_names(_metadata(wheel)) == {"dsh-session-core"}
    points = _entry_points(wheel)
    # A plugin that adds `view` and `export --html`: core imports nothing of the viewer.
    assert "[dsh_session.plugins]\nview = dsh_session_view.plugin" in points
    assert "console_scripts" not in points
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {n.split("/")[0] for n in names if "dist-info" not in n} == {"dsh_session_view"}
    page = ROOT / "packages" / "dsh-session-view" / "src" / "dsh_session_view" / "static"
    shipped = sorted(p.name for p in page.iterdir())
    assert {"index.html", "app.css", "app.js", "dom.js", "session.js"} <= set(shipped)
    for static in shipped:  # the page and every module it imports
        assert f"dsh_session_view/static/{static}" in names


def test_the_viewer_serves_in_the_batteries_and_is_named_without_them(
    batteries: Env, core_alone: Env, demo_log: Path, tmp_path: Path,
) -> None:
    out = tmp_path / "demo.html"
    batteries.run("export", "--html", str(demo_log), "-o", str(out))
    assert out.read_bytes().startswith(b"<!doctype html>")
    assert "--no-open" in batteries.run("view", "--help").stdout
    for argv in (["view", "--no-open"], ["export", "--html", str(demo_log)]):
        proc = core_alone.run(*argv, check=False)
        assert proc.returncode == 1, argv
        assert proc.stderr.splitlines()[-1] == "hint: pip install dsh-session-view", argv
        assert "Traceback" not in proc.stderr


# --- core alone ----------------------------------------------------------------------------


def test_core_alone_lists_exactly_the_core_event_types(core_alone: Env) -> None:
    assert core_alone.distributions() == {"dsh-session-core", "msgspec", "pluggy"}
    rows = msgspec.json.decode(core_alone.run("events", "--json").stdout)["events"]
    assert {r["type"] for r in rows} == CORE_TYPES
    assert {r["plugin"] for r in rows} == {"core"}
    plugins = msgspec.json.decode(core_alone.run("plugins", "--json").stdout)
    assert [p["name"] for p in plugins] == ["core"]
    assert plugins[0]["distribution"] == "dsh-session-core"
    assert "no plugins installed" in core_alone.run("plugins").stdout
    own = core_alone.python_code("import dsh_session_core as m; print(m.__version__)")
    assert own.stdout.strip() == "0.1.0", own.stderr
    version = core_alone.run("--version").stdout.splitlines()
    assert version[0].startswith("dsh-session-core 0.1.0 (Python ")
    assert version[1] == "plugins: none installed (core alone)"


def test_core_alone_has_no_plugin_package(core_alone: Env) -> None:
    for plugin in PLUGIN_NAMESPACES:
        proc = core_alone.python_code(f"import dsh_session_{plugin}")
        assert "ModuleNotFoundError" in proc.stderr, plugin
    demo = core_alone.run("demo", "--store", "/nonexistent-dir/x", check=False)
    assert demo.returncode == 1
    assert demo.stderr.splitlines()[-1] == "hint: pip install dsh-session"
    assert "Traceback" not in demo.stderr
    # Core alone lists its own commands only: the demo and the viewer add theirs.
    listed = core_alone.run("--help").stdout
    assert "    ls " in listed
    assert "    demo " not in listed
    assert "    view " not in listed


def test_core_alone_names_the_extra_a_compact_store_needs(core_alone: Env,
                                                         tmp_path: Path) -> None:
    """Without the zstd extra, core imports and runs; a compact store (``jsonl+zstd:``)
    is refused with the command that installs it, and no traceback."""
    proc = core_alone.run("ls", "--store", f"jsonl+zstd:///{tmp_path}/compact", check=False)
    assert proc.returncode == 1
    assert "pip install 'dsh-session-core[zstd]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    (tmp_path / "plain").mkdir()
    assert core_alone.run("ls", "--store", str(tmp_path / "plain")).returncode == 0


def test_core_alone_loads_derives_and_round_trips_a_log_of_absent_plugins(
    core_alone: Env, batteries: Env, demo_log: Path,
) -> None:
    text = demo_log.read_bytes()
    for namespace in PLUGIN_NAMESPACES.values():  # the log holds every plugin's events
        assert f'{{"type":"{namespace}/'.encode() in text, namespace
    exported = subprocess.run([str(core_alone.bin / "dsh-session"), "export", str(demo_log)],
                              capture_output=True, env=_environ(), check=True)
    assert exported.stdout == text  # the unknown types kept verbatim, byte for byte
    alone = msgspec.json.decode(core_alone.run("derive", str(demo_log)).stdout)
    everything = msgspec.json.decode(batteries.run("derive", str(demo_log)).stdout)
    assert alone == everything
    assert alone  # the demo's history is not empty
    # Through the library too: a durable store opens it, derives it, and writes nothing.
    code = (
        "import sys\n"
        "from dsh_session_core import JsonlBackend, DurableStore, OpaqueEvent\n"
        f"root = {str(demo_log.parents[1])!r}\n"
        "with DurableStore(JsonlBackend(root)) as store:\n"
        "    s = store.open('demo')\n"
        "    opaque = sorted({e.type for e in s.events if type(e) is OpaqueEvent})\n"
        "    print(len(s.derive_messages()), ' '.join(opaque))\n"
    )
    before = demo_log.read_bytes()
    proc = core_alone.python_code(code)
    assert proc.returncode == 0, proc.stderr
    count, _, opaque = proc.stdout.strip().partition(" ")
    assert int(count) == len(everything)
    assert set(PLUGIN_NAMESPACES.values()) <= {t.split("/")[0] for t in opaque.split()}
    assert demo_log.read_bytes() == before


def test_validate_strict_names_the_plugin_to_install(core_alone: Env, demo_log: Path) -> None:
    assert core_alone.run("validate", str(demo_log)).returncode == 0  # lenient: valid
    proc = core_alone.run("validate", "--strict", str(demo_log), check=False)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    for plugin, namespace in PLUGIN_NAMESPACES.items():
        mine = [line for line in lines if f" {namespace}/" in line]
        assert mine, namespace
        assert all(line.endswith(f"install dsh-session-{plugin} at $.type") for line in mine)


# --- core plus one plugin, and everything ------------------------------------------------


def test_core_and_one_plugin_show_that_plugins_events_only(core_and_compact: Env) -> None:
    assert core_and_compact.distributions() == {
        "dsh-session-core", "dsh-session-compact", "msgspec", "pluggy"}
    rows = msgspec.json.decode(core_and_compact.run("events", "--json").stdout)["events"]
    types = {r["type"] for r in rows}
    compact = {t for t in types if t.startswith("compact/")}
    assert compact == {"compact/start", "compact/end", "compact/summary"}
    assert types == CORE_TYPES | compact
    assert {r["plugin"] for r in rows if r["type"] in compact} == {"compact"}
    own = core_and_compact.python_code("import dsh_session_compact as m; print(m.__version__)")
    assert own.stdout.strip() == "0.1.0", own.stderr
    plugins = msgspec.json.decode(core_and_compact.run("plugins", "--json").stdout)
    assert [(p["name"], p["distribution"]) for p in plugins] == [
        ("core", "dsh-session-core"), ("compact", "dsh-session-compact")]


def test_the_batteries_bring_the_four_plugins_and_nothing_of_the_tests(
    batteries: Env,
) -> None:
    plugins = msgspec.json.decode(batteries.run("plugins", "--json").stdout)
    assert sorted(p["name"] for p in plugins) == [
        "compact", "core", "demo", "hooks", "mode", "todo", "view"]
    installed = batteries.distributions()
    assert not installed & {"pytest", "mypy", "ruff", "hypothesis", "dsh-session-example"}
    version = batteries.run("--version").stdout
    for plugin in PLUGIN_NAMESPACES:
        assert f"dsh-session-{plugin} 0.1.0" in version
    lines = version.splitlines()
    listed = [line.split() for line in lines[lines.index("distributions:") + 1:]]
    assert listed == [["dsh-session", "0.1.0"], *sorted(
        [f"dsh-session-{name}", "0.1.0"] for name in ["core", "view", *PLUGIN_NAMESPACES])]


def test_the_readme_demo_environment_holds_no_test_tooling() -> None:
    """``python3 dev.py demo`` installs the workspace only: no test group, no example."""
    sys.path.insert(0, str(ROOT))
    try:
        import dev
    finally:
        sys.path.remove(str(ROOT))
    demo = dev._requirements("demo")
    test = dev._requirements("test")
    _, group = dev._workspace()
    assert not set(group) & set(demo)
    assert not any("example_plugin" in arg for arg in demo)
    assert set(group) <= set(test)
    # The demo installs the batteries' members only; the integrations with third-party
    # frameworks (dsh-session-openai-agents...) are installed for the tests, before the
    # root, and never for the demo.
    assert [a for a in demo if a != "-e"] == [str(folder) for folder in [
        *(MEMBERS[d] for d in MEMBERS if d != "dsh-session"), ROOT]]
    integrations = [str(ROOT / m) for m in dev._integrations()]
    assert {"dsh-session-adk", "dsh-session-claude-agent", "dsh-session-langgraph",
            "dsh-session-openai-agents", "dsh-session-pydantic-ai"} <= {
        Path(i).name for i in integrations}
    assert not set(integrations) & set(demo)
    editable = [a for a in test if not a.startswith("-") and a not in group]
    assert editable[-len(integrations) - 2:-2] == integrations  # before the root


# --- the integrations, each alone beside core ----------------------------------------------

#: An integration with a framework, installed alone beside core from the two wheels in a
#: fresh environment (its framework from the package index): what it prints there, run
#: from a program that uses the framework through it and reads the result back with
#: core. Not the batteries: those are checked above, unchanged by the integrations.
INTEGRATIONS = {
    "dsh-session-claude-agent": ("""
import asyncio, sys
from claude_agent_sdk.testing import run_session_store_conformance
from dsh_session_core import create_plugin_manager, open_store
from dsh_session_claude_agent import DshSessionStore, dsh_session_id

async def main():
    url = "sqlite:///" + sys.argv[1]
    key = {"project_key": "p", "session_id": "s"}
    entry = {"type": "user", "message": {"role": "user", "content": "hello"}, "uuid": "u"}
    async with DshSessionStore(url) as store:
        await store.append(key, [entry])
    async with DshSessionStore(url) as store:  # a new store object reads it back
        print(await store.load(key) == [entry])
    await run_session_store_conformance(lambda: DshSessionStore("memory:"))
    with open_store(url) as store:
        derived = store.read_session(dsh_session_id(key)).derive_messages()
    print([m.role for m in derived])
    print(sorted(name for name, _ in create_plugin_manager().list_name_plugin()))

asyncio.run(main())
""", "True\n['user']\n['claude-agent', 'core']\n"),
    "dsh-session-langgraph": ("""
import sys
from langgraph.checkpoint.base import empty_checkpoint
from dsh_session_core import create_plugin_manager, open_store
from dsh_session_langgraph import DshCheckpointSaver

url = "sqlite:///" + sys.argv[1]
config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
with DshCheckpointSaver(url) as saver:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"n": 1}
    checkpoint["channel_versions"] = {"n": 1}
    saver.put(config, checkpoint, {"source": "input", "step": -1}, {"n": 1})
with DshCheckpointSaver(url) as saver:  # a new saver reads it back
    print(saver.get_tuple(config).checkpoint["channel_values"])
with open_store(url) as store:
    print(sum(e.type == "langgraph/checkpoint" for e in store.read_session("t").events))
print(sorted(name for name, _ in create_plugin_manager().list_name_plugin()))
""", "{'n': 1}\n1\n['core', 'langgraph']\n"),
    "dsh-session-pydantic-ai": ("""
import asyncio, sys
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from dsh_session_core import create_plugin_manager, open_store
from dsh_session_pydantic_ai import DshConversationStore

async def main():
    url = "sqlite:///" + sys.argv[1]
    async with DshConversationStore(url) as store:
        result = await Agent(TestModel(custom_output_text="hi")).run("hello")
        await store.save(result)
        conversation = await store.load(result.conversation.conversation_id)
    with open_store(url) as store:
        derived = store.read_session(conversation.conversation_id).derive_messages()
    print(len(conversation.messages), [m.role for m in derived])
    print(sorted(name for name, _ in create_plugin_manager().list_name_plugin()))

asyncio.run(main())
""", "2 ['user', 'assistant']\n['core', 'pydantic-ai']\n"),
}


@pytest.mark.parametrize("distribution", sorted(INTEGRATIONS))
def test_an_integration_installs_alone_beside_core(
    distribution: str, wheels: dict[str, Path], tmp_path: Path,
) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-build-isolation", "--wheel-dir", str(tmp_path),
         str(ROOT / "packages" / distribution)],
        check=True, capture_output=True, env=_environ(),
    )
    [wheel] = tmp_path.glob(_wheel_name(distribution) + "[0-9]*.whl")
    assert _requirement_names(_metadata(wheel)) >= {"dsh-session-core"}
    env = Env(tmp_path / "venv", [wheels["dsh-session-core"], wheel])
    ours = {d for d in env.distributions() if d.startswith("dsh-session")}
    assert ours == {"dsh-session-core", distribution}
    code, printed = INTEGRATIONS[distribution]
    proc = subprocess.run([env.python, "-c", code, str(tmp_path / "s.db")],
                          capture_output=True, text=True, env=_environ(), check=False)
    assert (proc.returncode, proc.stdout) == (0, printed), proc.stderr
