"""The real Gemini CLI TUI: a SIGKILL of the server at each point of the first prompt's
delivery never sends the prompt to the model twice (issue 19 item 1), and a server
SIGKILLed while a Gemini agent resumes, and restarted, still waits for the resumed
process to load its history before the agent takes a prompt (issue 33 item 10)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from fake_models import Script
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)

#: the points where a crash leaves the prompt half delivered (docs/internals.md)
POINTS = ["after_paste", "before_enter", "after_enter"]


@TMUX
@pytest.mark.parametrize("point", POINTS)
def test_a_sigkill_during_delivery_sends_the_first_prompt_once(real, point):
    scenarios.crash_during_delivery(real, real.gemini, point)


@TMUX
@pytest.mark.timeout(400)  # two Gemini CLI starts: 20-30 s each at load 45
def test_a_sigkill_while_an_agent_resumes_keeps_its_wait_for_the_history(real):
    """``agent resume`` of an exited agent, the server SIGKILLed once the resumed CLI's
    pane is recorded (``after_pane_recorded``) and started again: the restarted server
    finds the resume mark in the agent's data dir, the agent is ``idle`` only once the
    resumed CLI has loaded its history, and the next prompt reaches the model once,
    carrying the first prompt. The mark is gone after. (The deterministic check of the
    mark is plugins/gemini/tests/test_gemini_provider.py's.)"""
    real.gemini(Script({"after the resume": "resumed answer"}))
    first = "remember the word octopus"
    uuid = scenarios.start(real, "r/one", first)
    os.kill(real.pane_pid("r/one"), signal.SIGKILL)
    real.until_status("r/one", "ended", timeout=60)
    real.home.stop_server()
    real.home.start_server(extra_env={"ORCR_FAULT": "after_pane_recorded"})
    real.orcr("agent", "resume", "r/one", check=False)  # the server may die as it answers
    assert real.home.proc.wait(120) == -signal.SIGKILL, real.home.server_log()
    mark = Path(real.home.path) / "agents" / uuid / "gemini-resuming.json"
    assert mark.exists(), "no resume mark on disk when the server died"
    real.home.start_server()
    real.until_status("r/one", "idle", timeout=max(90, real.idle_wait))
    assert not mark.exists()
    request = scenarios.send_after_resume(real, "r/one", "after the resume")
    assert first in json.dumps(request.body.get("contents")), real.why("r/one")
    assert real.model.once_problems(["after the resume"]) == [], real.model.user_texts()
