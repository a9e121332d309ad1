"""The root conftest's ``RERUN REASON`` line carries the failure's whole error text: a
flake that failed once on an assertion printing a long row still names its cause, and
the test's line it failed at (a message can be all screen dump)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FLAKY = """
import pathlib

def test_flaky():
    ran = pathlib.Path(__file__).with_suffix(".ran")
    if not ran.exists():
        ran.write_text("once")
        row = {"path": "b/codex0", "status": "ended", "filler": "x" * 300,
               "error": "the program exited (1) before its prompt was pasted"}
        assert row["status"] == "idle", row
"""


def test_a_rerun_reason_names_the_whole_error(tmp_path):
    (tmp_path / "test_flaky.py").write_text(textwrap.dedent(FLAKY))
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n0", "-p", "conftest", "-p", "no:cacheprovider",
         "--reruns", "1", "test_flaky.py"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    reasons = [ln for ln in res.stdout.splitlines() if ln.startswith("RERUN REASON")]
    assert len(reasons) == 1, res.stdout
    # where in the test it failed (line 10 of FLAKY, its assert), then the whole message
    where = "test_flaky.py::test_flaky (call): at test_flaky.py:10: AssertionError: {'path'"
    assert where in reasons[0], reasons[0]
    assert "the program exited (1) before its prompt was pasted" in reasons[0], reasons[0]
