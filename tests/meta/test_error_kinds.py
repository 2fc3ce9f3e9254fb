"""No module of core (nor of any other distribution) tells what kind of error it caught
by reading the error's message:
it tests the error's type (``except SessionNotStoredError``, ``isinstance``), or data the
error carries (``exc.session_id``, SQLite's ``sqlite_errorcode``), or what it was raised
from (``exc.__context__``). A message is for people: rewording it (or a backend of
another author wording its own) must not change what the code does.

Checked on the source (AST). An error's message is ``str(exc)``, ``repr(exc)``,
``exc.args``, ``exc.message``, an f-string holding ``exc``, anything made of one
(``str(exc).lower()``), and a name given one in the same function (``text =
str(exc)``), where ``exc`` is a name an ``except ... as`` binds or a parameter annotated
with an exception class (``exc: ValueError``). What compares one (``==``, ``!=``,
``in``, ``not in``) or searches one (``startswith``, ``find``, a regular expression's
``match``/``search``...) breaks the rule. Formatting a message into another one is not
telling its kind, and is allowed.

Each rule is a function over source text, so the tests show it bites on a module that
breaks it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"

#: Where a message is read for what it says, and why nothing else can tell it:
#: (module, relative to packages/; function) -> the reason.
ALLOWED: dict[tuple[str, str], str] = {
    ("dsh-session-core/src/dsh_session_core/_schema/validate.py", "schema_problem"): (
        "msgspec's ValidationError carries the path and the kind of a mismatch only in "
        "its text (no attribute, no subclass): the path is cut out of it, and an unknown "
        "union tag is told by it"
    ),
    ("dsh-session-core/src/dsh_session_core/_persistence/backends/redis/nodes.py", "moved"): (
        "a Redis error reply's kind is the reply's first word, the protocol's error code "
        "(MOVED, ASK); redis-py 5's plain client raises a cluster's as a bare "
        "ResponseError, with that code in its text alone"
    ),
    ("dsh-session-core/src/dsh_session_core/_persistence/backends/redis/nodes.py",
     "unavailable"): (
        "a Redis error reply's kind is the reply's first word, the protocol's error code "
        "(CLUSTERDOWN, TRYAGAIN, MASTERDOWN); redis-py 5's plain client raises them as a "
        "bare ResponseError, with that code in its text alone"
    ),
}

#: The methods that search a string (or, on a compiled pattern, search their argument).
_SEARCHES = frozenset({
    "startswith", "endswith", "find", "rfind", "index", "rindex", "count", "__contains__",
    "match", "search", "fullmatch", "findall", "finditer",
})
_COMPARES = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _names_an_exception(annotation: ast.expr | None) -> bool:
    """Whether a parameter's annotation names an exception class (``ValueError``,
    ``BaseException``, ``errors.PersistenceError``, ``X | Y``, a string of one)."""
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return any(part.strip().rsplit(".", 1)[-1].endswith(("Error", "Exception"))
               for part in text.strip("'\"").split("|"))


class _Function:
    """What one function (or the module's top level) holds: the names of errors, and the
    names given an error's message."""

    def __init__(self, node: ast.AST) -> None:
        self.errors: set[str] = set()
        self.messages: set[str] = set()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if _names_an_exception(arg.annotation):
                    self.errors.add(arg.arg)
        for sub in _own_nodes(node):
            if isinstance(sub, ast.ExceptHandler) and sub.name:
                self.errors.add(sub.name)
        # A name given a message, to a fixed point (``a = str(exc)``; ``b = a.lower()``).
        while True:
            before = len(self.messages)
            for sub in _own_nodes(node):
                if isinstance(sub, ast.Assign | ast.AnnAssign | ast.NamedExpr) and (
                        sub.value is not None and self.holds_message(sub.value)):
                    targets: list[ast.expr] = (
                        sub.targets if isinstance(sub, ast.Assign) else [sub.target])
                    self.messages.update(_bound(targets))
            if len(self.messages) == before:
                break

    def is_message(self, node: ast.expr) -> bool:
        """Whether ``node`` itself is an error's message."""
        if isinstance(node, ast.Name):
            return node.id in self.messages
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id in ("str", "repr", "format") and node.args):
            return self._is_error(node.args[0])
        if isinstance(node, ast.Attribute) and node.attr in ("args", "message"):
            return self._is_error(node.value)
        if isinstance(node, ast.JoinedStr):
            return any(isinstance(v, ast.FormattedValue) and self._is_error(v.value)
                       for v in node.values)
        return False

    def holds_message(self, node: ast.expr) -> bool:
        """Whether an error's message is ``node`` or a part of it (``str(exc).lower()``,
        ``exc.args[0]``, ``" ".join(str(exc).split())``)."""
        return any(isinstance(sub, ast.expr) and self.is_message(sub) for sub in ast.walk(node))

    def _is_error(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id in self.errors


def _bound(targets: list[ast.expr]) -> Iterator[str]:
    """The names an assignment binds (``a = ...``, ``a, b = ...``), not the objects it
    stores into (``row["error"] = ...``, ``self.error = ...``)."""
    for target in targets:
        if isinstance(target, ast.Name):
            yield target.id
        elif isinstance(target, ast.Tuple | ast.List):
            yield from _bound(list(target.elts))
        elif isinstance(target, ast.Starred):
            yield from _bound([target.value])


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``node``'s body, not those of the functions defined in it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        yield child
        yield from _own_nodes(child)


def _scopes(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """The module's top level and each function in it, with its name."""
    yield "<module>", tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node


def message_tests(source: str) -> list[tuple[str, int, str]]:
    """Where ``source`` tells an error's kind by its message: (function, line, code)."""
    tree = ast.parse(source)
    found = []
    for name, scope in _scopes(tree):
        fn = _Function(scope)
        if not fn.errors:
            continue
        for node in _own_nodes(scope):
            bad = False
            if isinstance(node, ast.Compare) and any(isinstance(op, _COMPARES)
                                                     for op in node.ops):
                bad = any(fn.holds_message(e) for e in [node.left, *node.comparators])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    node.func.attr in _SEARCHES):
                bad = fn.holds_message(node.func.value) or any(
                    fn.holds_message(a) for a in node.args)
            if bad:
                found.append((name, node.lineno, ast.unparse(node)))  # type: ignore[attr-defined]
    return found


def _modules() -> list[Path]:
    """Every module of every distribution (their ``src`` trees)."""
    found = sorted(PACKAGES.glob("*/src/**/*.py"))
    assert any(p.name == "durable.py" for p in found)  # core's among them
    return found


def test_no_module_tells_an_error_by_its_message() -> None:
    broken = []
    allowed_seen = set()
    for path in _modules():
        module = path.relative_to(PACKAGES).as_posix()
        for function, line, code in message_tests(path.read_text(encoding="utf-8")):
            if (module, function) in ALLOWED:
                allowed_seen.add((module, function))
                continue
            broken.append(f"{module}:{line} ({function}): {code}")
    assert broken == []
    # An exception that no longer holds is dropped from the list.
    assert allowed_seen == set(ALLOWED)


# --- the rule bites ---------------------------------------------------------------------

_PLANTED = '''
from dsh_session_core.errors import PersistenceError

def ledger_events(store):
    try:
        return store.read("ledger")
    except PersistenceError as exc:
        if str(exc) == 'session "ledger" not found':
            return []
        raise
'''


def test_a_planted_comparison_of_a_message_is_found() -> None:
    assert message_tests(_PLANTED) == [
        ("ledger_events", 8, "str(exc) == 'session \"ledger\" not found'")]


@pytest.mark.parametrize("test", [
    '"not found" in str(exc)',
    '"UNIQUE" not in str(exc)',
    'str(exc) != missing',
    'str(exc).startswith("session")',
    'str(exc).lower().endswith("not found")',
    'exc.args[0] == "x"',
    'exc.message == "x"',
    'f"{exc}" == "x"',
    're.search("quote", str(exc))',
    'PATTERN.match(str(exc))',
    'repr(exc).find("x") >= 0',
])
def test_each_way_of_reading_a_message_is_found(test: str) -> None:
    source = ("def f():\n    try:\n        g()\n    except ValueError as exc:\n"
              f"        if {test}:\n            pass\n")
    assert [line for _, line, _ in message_tests(source)] == [5]


def test_a_message_given_a_name_then_compared_is_found() -> None:
    source = ("def f():\n    try:\n        g()\n    except OSError as err:\n"
              "        text = ' '.join(str(err).split())\n        words = text.lower()\n"
              "        return 'readonly' in words\n")
    assert message_tests(source) == [("f", 7, "'readonly' in words")]


def test_an_error_given_as_a_parameter_is_checked_too() -> None:
    source = ("def hint(exc: ValueError) -> str | None:\n"
              "    return 'q' if 'quote' in str(exc) else None\n")
    assert message_tests(source) == [("hint", 2, "'quote' in str(exc)")]


def test_testing_the_type_or_the_data_of_an_error_is_not_reading_its_message() -> None:
    source = '''
def f(store, sid):
    try:
        return store.read(sid)
    except SessionNotStoredError as exc:
        if exc.session_id == sid and isinstance(exc.__context__, OverflowError):
            raise Failure(str(exc), hint=" ".join(str(exc).split())) from None
        text = f"cannot read {sid}: {exc}"
        return [text, exc.sqlite_errorname in CLASHES]
'''
    assert message_tests(source) == []
