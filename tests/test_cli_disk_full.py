"""A full disk under a CLI command gives one clear line and exit 1, not a traceback
(the chaos soak saw ``orcr tasks add`` print ENOSPC's traceback on a full ``ORCR_HOME``)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

SCRIPT = """
import errno, os, sys
from orcr_core.cli.errors import handle_errors
with handle_errors():
    raise OSError(int(sys.argv[1]), os.strerror(int(sys.argv[1])), "/q/todo/t1.md")
"""


def _run(code: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(code)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_is_one_line_naming_the_file_and_what_to_do(code):
    r = _run(code)
    assert r.returncode == 1, r
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("Error: disk full"), r.stderr
    assert "/q/todo/t1.md" in r.stderr and os.strerror(code) in r.stderr
    assert "free some space" in r.stderr


def test_other_os_errors_still_show_their_traceback():
    r = _run(errno.EIO)  # not the user's to fix by freeing space: a bug report needs it
    assert r.returncode == 1 and "Traceback" in r.stderr, r
