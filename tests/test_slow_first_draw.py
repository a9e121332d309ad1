"""A TUI that draws nothing for longer than orcr's 10 s wait for an unknown screen gets
its first prompt once it is up, not typed into the void.

OpenCode 1.18 under load (2 cores at load 10-30) shows a blank pane for 20-56 s
before its first draw, and a prompt typed before then is lost: like any raw-mode
TUI it discards input that arrived before it took the terminal. The fake here does
the same (sleeps, then flushes its input with ``tcflush``, draws OpenCode's ready
screen, and writes the line it reads to a file).
"""

from __future__ import annotations

import sys
import textwrap

import pytest

from orcr_core.kit.testing import until

FAKE = textwrap.dedent(
    """
    import sys, termios, time
    time.sleep(float(sys.argv[2]))
    termios.tcflush(0, termios.TCIFLUSH)  # what came before the TUI was up is gone
    print("  Ask anything…", flush=True)
    with open(sys.argv[1], "w") as out:
        out.write(sys.stdin.readline())
    time.sleep(600)
    """
)


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_prompt_waits_for_a_tui_that_draws_late(live, short_tmp):
    fake = short_tmp / "slow_tui.py"
    fake.write_text(FAKE)
    got = short_tmp / "got.txt"
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n'
        + f'[providers.opencode]\nargv = ["{sys.executable}", "{fake}", "{got}", "13"]\n'
    )
    live.start_server()
    live.run("agent", "run", "--provider", "opencode", "--path", "s/one", "--cwd",
             str(short_tmp), "hello slow tui", check=True)  # fmt: skip
    until(lambda: got.exists() and got.read_text().endswith("\n"), 60, "the line read")
    assert got.read_text() == "hello slow tui\n"
    live.run("agent", "kill", "s/one", check=True)
