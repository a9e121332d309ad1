"""The old import paths of moved modules keep working for one release, with a warning
(orcr_core/_deprecated.py): a plugin built against them (an installed ``orcr-pi`` 0.1,
a third party's) keeps running."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from orcr_core._deprecated import MOVED, OrcrDeprecationWarning


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_imports_the_moved_module_and_warns(old, monkeypatch):
    """Planted: the finder not installed by orcr_core/__init__ -> ModuleNotFoundError;
    the warning dropped -> fails."""
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(OrcrDeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    new = importlib.import_module(MOVED[old])
    assert module is new  # one module: a monkeypatch through the old name reaches the code
    assert new.__spec__.name == MOVED[old]  # the alias's import left the module's spec alone


def test_from_import_of_an_old_name_works_and_points_at_the_importer():
    """``from orcr_core import jsonl_tail`` (the form orcr-pi 0.1's tests use) still works,
    and the warning names the importing line, not importlib's."""
    out = subprocess.run(
        [
            sys.executable,
            "-W",
            "always",
            "-c",
            "from orcr_core import jsonl_tail\nprint(jsonl_tail.JsonlTail.__module__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "orcr_core.kit.jsonl_tail"
    assert "<string>:1: OrcrDeprecationWarning: orcr_core.jsonl_tail moved to" in out.stderr


def test_an_unknown_name_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("orcr_core.no_such_module")
