"""The automatic ``e2e`` marker: a test that starts a server, a multiplexer,
PostgreSQL or a real CLI is marked from what it uses, never by hand, the way
pytest's own ``testing/conftest.py`` marks its slow tests (by fixture name, and by
the names a test's code calls).

``python -m pytest -m "not e2e"`` is the inner loop before every commit: the unit
tests, in well under a minute (docs/internals.md, "Running the tests").
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

#: fixtures whose setup starts a process the test then talks to: an orcr home (the
#: CLI, a server; ``server``, ``live``, ``twin`` and the loop helpers build on it),
#: the herdr emulator (or a herdr shim that starts it), a tmux sandbox, PostgreSQL,
#: a PTY running a fake agent
E2E_FIXTURES = frozenset(
    {"orcr_home", "make_emulator", "sandbox", "pg_cluster", "echo_pty", "shim_env"}
)

#: markers that mean the same: the real provider CLIs
E2E_MARKERS = ("real_cli",)

#: names whose use in a test's code (or a test helper it calls) starts a process:
#: ``subprocess.run``/``Popen``, ``os.fork``, ``pty.fork``, ``multiprocessing``
SPAWNS = frozenset({"subprocess", "Popen", "fork", "forkpty", "multiprocessing", "spawn"})

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: starts a server, a multiplexer, PostgreSQL or a process (a real CLI); set "
        "from the fixtures a test uses and the names its code calls (tests/_support/"
        "e2e.py); -m 'not e2e' runs the fast rest",
    )


def _in_tests(obj) -> bool:
    """Whether ``obj`` (a function or a class) is written in the suite's own test
    files, tests/ and plugins/*/tests: the code under test is not walked."""
    code = getattr(obj, "__code__", None)
    if code is not None:
        where = code.co_filename
    elif isinstance(obj, type):
        where = getattr(__import__("sys").modules.get(obj.__module__), "__file__", None) or ""
    else:
        return False
    path = Path(where)
    return ROOT in path.parents and "tests" in path.relative_to(ROOT).parts


def _codes(obj):
    """The functions ``obj`` stands for: itself, or a class's methods and properties."""
    if not isinstance(obj, type):
        yield obj
        return
    for value in vars(obj).values():
        if isinstance(value, property):
            value = value.fget
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, types.FunctionType):
            yield value


def _names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def spawns(obj, depth: int = 3, seen: set | None = None) -> bool:
    """Whether ``obj``'s code, or a test helper (function or class) it names,
    ``depth`` calls deep, names a way to start a process."""
    seen = set() if seen is None else seen
    for func in _codes(obj):
        code = getattr(func, "__code__", None)
        if code is None or code in seen:
            continue
        seen.add(code)
        names = set(_names(code))
        if names & SPAWNS:
            return True
        if depth == 0:
            continue
        scope = getattr(func, "__globals__", {})
        for name in names:
            helper = scope.get(name)
            if _in_tests(helper) and spawns(helper, depth - 1, seen):
                return True
    return False


def _fixtures(item: pytest.Item):
    """The functions of the fixtures ``item`` uses that the suite itself defines."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        for fixturedef in defs:
            if _in_tests(fixturedef.func):
                yield fixturedef.func


def is_e2e(item: pytest.Item) -> bool:
    if E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    if any(item.get_closest_marker(name) for name in E2E_MARKERS):
        return True
    if not isinstance(item, pytest.Function):
        return False
    return spawns(item.function) or any(spawns(f) for f in _fixtures(item))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Before ``-m`` selects (tryfirst: pytest's own deselection runs after)."""
    for item in items:
        if is_e2e(item):
            item.add_marker(pytest.mark.e2e)
