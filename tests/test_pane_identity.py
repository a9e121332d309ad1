"""A tmux pane's process is told apart by its pid and when it started (rematch.identity,
procs.stamp): counted from boot, so a wall clock stepped or slewed (NTP, a resume from
sleep) never makes the agent's own process look like another one. psutil's
``create_time`` is the kernel's boot time plus the start ticks, and the boot time
(``btime``: the wall clock less the uptime) moves with the wall clock: CI saw two echo
agents end ``lost`` at one moment, and the real_cli tier one OpenCode agent ("another
process in the agent's pane", the same pid 3 s later)."""

from __future__ import annotations

import subprocess
import sys
import types

import psutil
import pytest

from orcr_core.agents import procs, rematch
from orcr_core.contracts import PaneInfo


@pytest.fixture
def proc():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def _pane(pid: int) -> PaneInfo:
    return PaneInfo("%1", "s", "w", pid=pid)


def _row(ident: str | None):
    return types.SimpleNamespace(pane_process=ident)


def test_a_wall_clock_step_leaves_the_pane_process_itself(proc, monkeypatch):
    """Planted: the stamp from psutil's create_time again -> replaced after the step."""
    row = _row(rematch.identity(_pane(proc.pid)))
    assert row.pane_process.startswith(f"pid:{proc.pid}@b")
    real = psutil.Process.create_time
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: real(self) + 1.0)
    assert not rematch.replaced(row, _pane(proc.pid))
    assert procs.root(types.SimpleNamespace(uuid="u-none", pane_process=row.pane_process))


def test_another_process_or_start_is_replaced(proc):
    assert rematch.replaced(_row(f"pid:{proc.pid}@b1.00"), _pane(proc.pid))
    assert rematch.replaced(_row("pid:1@b1.00"), _pane(proc.pid))


def test_a_row_written_with_the_wall_clock_start_is_read_in_its_own_form(proc):
    """Rows recorded before stamps counted from boot hold psutil's start: the same
    process is still itself, another start is not."""
    wall = psutil.Process(proc.pid).create_time()
    assert not rematch.replaced(_row(f"pid:{proc.pid}@{wall:.2f}"), _pane(proc.pid))
    assert rematch.replaced(_row(f"pid:{proc.pid}@{wall - 5:.2f}"), _pane(proc.pid))
    assert procs.root(types.SimpleNamespace(uuid="u-w", pane_process=f"pid:{proc.pid}@{wall:.2f}"))
