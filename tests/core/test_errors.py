"""The public error module is every error's home: users import ``dsh_session_core.errors.X``
and the docs show that name, so each class says it lives there (its ``__module__``),
whichever private module defines it (docs/decisions.md, "A module of the model holds one
concern"). A repr, a traceback's last line and a pickle all read that name."""

from __future__ import annotations

import pickle
import traceback

import pytest

from dsh_session_core import errors

PUBLIC = "dsh_session_core.errors"


def _classes() -> list[type]:
    found = [getattr(errors, name) for name in errors.__all__]
    assert all(isinstance(c, type) for c in found)
    return found


def test_every_error_names_the_public_module_as_its_own() -> None:
    classes = _classes()
    assert len(classes) == len(errors.__all__) > 30
    wrong = {c.__qualname__: c.__module__ for c in classes if c.__module__ != PUBLIC}
    assert wrong == {}
    for cls in classes:
        assert repr(cls) == f"<class '{PUBLIC}.{cls.__qualname__}'>"


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__qualname__)
def test_a_pickled_error_class_is_found_again_by_its_public_name(cls: type) -> None:
    dumped = pickle.dumps(cls)
    assert f"{PUBLIC}\n".encode() in pickle.dumps(cls, protocol=0)
    assert pickle.loads(dumped) is cls


def test_a_pickled_error_comes_back_as_itself() -> None:
    error = errors.PluginError("no plugin here")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is errors.PluginError
    assert again.args == ("no plugin here",)


def test_a_traceback_names_the_error_by_its_public_name() -> None:
    error = errors.SchemaError("the payload does not fit", event_type="user/message", seq=3,
                               path="$.content", plugin="core")
    line = traceback.format_exception_only(error)[-1]
    assert line == f"{PUBLIC}.SchemaError: the payload does not fit\n"


def test_the_hierarchy_holds_across_the_groups() -> None:
    # The groups live in separate modules; their bases are still the one hierarchy.
    assert issubclass(errors.TooDeepError, errors.NotJsonError)
    assert issubclass(errors.UnknownMemberError, errors.SchemaError)
    assert issubclass(errors.SessionIdError, errors.UnstorableError)
    assert issubclass(errors.MisplacedLogError, errors.LogFormatError)
    assert issubclass(errors.DuplicateUnionMemberError, errors.PluginError)
    base = errors.DshSessionError
    assert all(issubclass(c, base) for c in _classes() if not issubclass(c, Warning))
    assert {c for c in _classes() if issubclass(c, Warning)} == {
        errors.SkippedLogWarning, errors.UnknownPluginWarning, errors.UnreadableSessionWarning}
