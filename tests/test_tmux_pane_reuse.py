"""Pane ids restart with a new tmux server (``%0``, ``%1``, ...), so a starting agent's
recorded pane id can name another agent's pane after a tmux restart. The soak (seed
2027) caught orcr pasting a task verifier's first prompt into a loop agent's pane that
way. The prompt is typed only into a pane carrying the agent's marks (instance and
launch token), checked by tmux in the same step as the paste and the Enter."""

from __future__ import annotations

import subprocess

import pytest
from orcr_tmux.driver import TmuxDriver

from orcr_core.contracts import DriverError, PaneRef
from orcr_core.kit.testing import until


def _tmux(sock, *args):
    return subprocess.run(
        ["tmux", "-S", str(sock), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_prompt_is_never_typed_into_a_pane_with_other_marks(short_tmp):
    sock = short_tmp / "tmux.sock"
    _tmux(sock, "new-session", "-d", "-s", "orcr-t", "-x", "100", "-y", "20", "cat")
    try:
        pane_id = _tmux(sock, "display-message", "-p", "-t", "orcr-t", "#{pane_id}")
        _tmux(sock, "set-option", "-p", "-t", pane_id, "@orcr_instance", "inst1")
        _tmux(sock, "set-option", "-p", "-t", pane_id, "@orcr_token", "tokb")
        driver = TmuxDriver({"tmux.socket": str(sock)})
        theirs = PaneRef("orcr-t", "@0", pane_id, instance="inst1", launch_token="toka")
        with pytest.raises(DriverError) as exc:
            driver.paste_prompt(theirs, "intruder")
        assert exc.value.code == "pane_not_found" and "not this agent's" in str(exc.value)
        with pytest.raises(DriverError):
            driver.submit_prompt(theirs)
        mine = PaneRef("orcr-t", "@0", pane_id, instance="inst1", launch_token="tokb")
        driver.paste_prompt(mine, "hello")
        driver.submit_prompt(mine)
        screen = until(
            lambda: (lambda s: s if "hello" in s else None)(
                _tmux(sock, "capture-pane", "-p", "-t", pane_id)
            ),
            what="the prompt in its own pane",
        )
        assert "intruder" not in screen
        assert _tmux(sock, "list-buffers") == ""  # the refused paste left no buffer
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
