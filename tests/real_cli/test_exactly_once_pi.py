"""The real pi TUI: a SIGKILL of the server at each point of the first prompt's delivery
never sends the prompt to the model twice (issue 19 item 1). pi writes its session only
with the first answer, so a restart that finds no session yet decides from the pane."""

from __future__ import annotations

import pytest
from real_cli import scenarios

pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")

#: the points where a crash leaves the prompt half delivered (docs/internals.md)
POINTS = ["after_paste", "before_enter", "after_enter"]


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.parametrize("point", POINTS)
def test_a_sigkill_during_delivery_sends_the_first_prompt_once(real, point):
    scenarios.crash_during_delivery(real, real.pi, point)
