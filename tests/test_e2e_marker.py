"""The automatic ``e2e`` marker (tests/_support/e2e.py): what a test starts marks it,
so ``-m "not e2e"`` is the fast inner loop and never runs a server or a CLI."""

from __future__ import annotations

import subprocess
import sys

from _support.e2e import spawns


def _starts_a_cli():
    return subprocess.run([sys.executable, "-c", "pass"], check=True)


def _calls_a_helper_that_starts_one():
    return _starts_a_cli()


class _Host:
    def orcr(self):
        return _starts_a_cli()


def _uses_a_host():
    return _Host().orcr()


def _pure():
    return sorted([3, 1, 2])


#: looked up by key, so that this test's own code names none of them (it stays a unit test)
CASES = {
    "cli": _starts_a_cli,
    "helper": _calls_a_helper_that_starts_one,
    "class": _uses_a_host,
    "pure": _pure,
}


def test_a_test_that_names_a_process_start_or_a_helper_that_does_is_e2e(request):
    """Planted: helpers not walked (depth 0) -> the helper and class cases fail."""
    assert {name: spawns(func) for name, func in CASES.items()} == {
        "cli": True,
        "helper": True,
        "class": True,
        "pure": False,
    }
    assert request.node.get_closest_marker("e2e") is None


def test_a_test_with_an_orcr_home_is_marked_e2e(orcr_home, request):
    """Planted: the marker hook removed -> fails."""
    assert request.node.get_closest_marker("e2e") is not None


def test_a_unit_test_is_not_marked(request):
    assert request.node.get_closest_marker("e2e") is None
