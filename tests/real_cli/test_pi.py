"""The real pi coding agent TUI driven by orcr (tests/real_cli/conftest.py's ``real.pi``:
its own agent folder, the fake Anthropic API as its model provider).

pi asks no start-up question (no trust, login or update dialog) and no permission
question (its tools run without asking), so the dialog and blocked scenarios of
claude and codex have no pi counterpart (docs/providers/pi.md). orcr-pi is its own
distribution: provider-smoke installs it into the test environment.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from fake_models import Error, Hold, Script
from real_cli import scenarios

orcr_pi = pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)
BOTH = pytest.mark.parametrize("live", ["tmux", "herdr"], indirect=True)


@BOTH
def test_first_prompt_and_follow_ups(real):
    scenarios.first_prompt_and_follow_ups(real, real.pi)
    a = real.get("x/talk")
    assert a["agent_session"]["kind"] == "path" and a["agent_session"]["value"].endswith(
        "pi-session.jsonl"
    )


@BOTH
def test_slow_turn_is_working_then_idle(real):
    scenarios.slow_turn(real, real.pi)


@BOTH
def test_interrupted_turn(real):
    scenarios.interrupted_turn(real, real.pi)


@TMUX
def test_an_error_past_pis_retries_is_an_errored_turn(real):
    """5xx on every request: the SDK's retries, pi's three (2 s, 4 s, 8 s apart), then the
    turn ends errored."""
    scenarios.errored_turn(real, real.pi)


@TMUX
def test_an_error_pi_does_not_retry_is_an_errored_turn(real):
    """A 400 ends the turn errored at once (``agent wait`` exits 7 with the error); the
    next prompt is answered."""
    real.pi(Script({"break": Error(400, "bad request (fake)", "invalid_request_error"),
                    "again": "fine again"}))  # fmt: skip
    scenarios.start(real, "e/one")
    real.orcr("agent", "send", "e/one", "break it")
    r = real.orcr("agent", "wait", "e/one", "--timeout", "60s", check=False, timeout=90)
    assert r.returncode == 7 and "bad request (fake)" in (r.stdout + r.stderr), real.why("e/one")
    assert real.get("e/one")["turn_status"] == "errored"
    real.orcr("agent", "send", "e/one", "again please")
    real.wait_idle("e/one")
    assert real.read("e/one")["text"] == "fine again"


@TMUX
def test_kill(real):
    hold = Hold("never finished")
    real.pi(Script({"long": hold}))
    scenarios.kill_a_working_agent(real, hold)


@TMUX
def test_turn_timeout(real):
    hold = Hold("never finished")
    real.pi(Script({"long": hold}))
    scenarios.turn_timeout(real, hold)


@TMUX
def test_gc(real):
    real.timings["gc_after"] = "2s"
    real.pi(Script())
    scenarios.gc_an_idle_agent(real)


@TMUX
def test_resume_continues_the_session(real):
    """``pi --session <the same file>``: the next request carries the first prompt."""
    real.pi(Script({"after the resume": "resumed answer"}))

    def history_has(body, prompt):
        return prompt in json.dumps(body.get("messages"))

    scenarios.resume_an_exited_agent(real, "remember the word octopus", history_has)


@TMUX
def test_the_pin_covers_this_release(provider_bin, live):
    """The tier runs with ``allow_unpinned`` so a new release can be vetted; once it
    passes, the adapter's pin must include it (docs/providers/pi.md)."""
    out = subprocess.run([str(provider_bin / "pi"), "--version"], capture_output=True, text=True)
    version = (out.stdout + out.stderr).split()[0]  # 0.73.1 prints it on stderr
    assert orcr_pi.PiProvider().check_version(version, {}) is None
    assert orcr_pi.provider.package_version(str(provider_bin / "pi")) == version
