"""The real Gemini CLI TUI driven by orcr (tests/real_cli/conftest.py sets it up).

The shared scenarios (tests/real_cli/scenarios.py) on tmux, the driver-facing ones on
the herdr emulator too, plus Gemini CLI's own: its session file found by the id orcr
gave it, the turn-end hook, the folder-trust question at start-up, the pin.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from fake_models import Error, Hold, Script
from orcr_gemini import GeminiProvider
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)
BOTH = pytest.mark.parametrize("live", ["tmux", "herdr"], indirect=True)


@BOTH
def test_first_prompt_and_follow_ups(real):
    scenarios.first_prompt_and_follow_ups(real, real.gemini)
    a = real.get("x/talk")
    assert a["agent_session"] == {"source": "orcr", "kind": "id", "value": a["uuid"]}, a
    (session,) = real.cli_home.glob(".gemini/tmp/*/chats/session-*.jsonl")
    lines = [json.loads(x) for x in session.read_text().splitlines()]
    assert lines[0]["sessionId"] == a["uuid"]
    # orcr's AfterAgent hook marked each of the three turn ends
    assert sum(1 for x in lines if x.get("orcr") == "turn_end") == 3, session.read_text()


@BOTH
def test_slow_turn_is_working_then_idle(real):
    scenarios.slow_turn(real, real.gemini)


@BOTH
def test_permission_prompt_is_reported_blocked_and_answered_with_send_key(real):
    scenarios.permission_blocked(real, real.gemini, "Allow execution of")


@TMUX
def test_interrupted_turn(real):
    scenarios.interrupted_turn(real, real.gemini)


@TMUX
def test_errored_turn(real):
    """A 400 (Gemini CLI retries a 500 for minutes, past ``general.maxAttempts``)."""
    scenarios.errored_turn(real, real.gemini, Error(400, "fake bad request", times=50))


@TMUX
def test_kill(real):
    hold = Hold("never finished")
    real.gemini(Script({"long": hold}))
    scenarios.kill_a_working_agent(real, hold)


@TMUX
def test_turn_timeout(real):
    hold = Hold("never finished")
    real.gemini(Script({"long": hold}))
    scenarios.turn_timeout(real, hold)


@TMUX
def test_gc(real):
    real.timings["gc_after"] = "2s"
    real.gemini(Script())
    scenarios.gc_an_idle_agent(real)


@TMUX
@pytest.mark.timeout(400)  # two Gemini CLI starts: 20-30 s each at load 45
def test_resume_continues_the_session(real):
    """``gemini --resume <session id>``: the next request carries the first prompt, and
    the turns go on in the same session file."""
    real.gemini(Script({"after the resume": "resumed answer"}))

    def history_has(body, prompt):
        return prompt in json.dumps(body.get("contents"))

    scenarios.resume_an_exited_agent(real, "remember the word octopus", history_has)
    # (a resumed Gemini CLI also opens a session file of its own at start, empty)
    uuid = real.get("r/one")["uuid"]
    path = GeminiProvider.find_file(real.cli_home, uuid)
    text = open(path).read()
    assert "remember the word octopus" in text and "after the resume" in text


@BOTH
def test_untrusted_folder_is_a_dialog_until_answered(real):
    """In a folder not trusted yet Gemini CLI asks "Do you trust the files in this
    folder?": the agent stays ``starting`` with the reason and the prompt waits;
    answered with ``agent send --key enter`` (Trust folder), the prompt reaches the
    model once."""
    real.timings["max_starting"] = "120s"
    real.gemini(Script({"hello": "Hi after trust"}), trusted=False)
    real.run("x/trust", "hello there")
    try:
        a = real.until_blocked("x/trust", "trust", timeout=90)
    except AssertionError as exc:
        raise AssertionError(real.why("x/trust", str(exc))) from None
    assert a["status"] == "starting", a
    assert real.model.prompts() == []
    real.orcr("agent", "send", "x/trust", "--key", "enter")
    real.wait_idle("x/trust", 90)
    assert real.read("x/trust")["text"] == "Hi after trust", real.why("x/trust")
    assert real.model.once_problems(["hello there"]) == []


@BOTH
def test_trust_cwd_answers_the_trust_question(real):
    """orcr answers "Trust folder"; Gemini CLI restarts itself (a new process, 10-30 s
    on a busy machine, showing only "Gemini CLI is restarting to apply the trust
    changes..."; keys typed meanwhile are lost) and the prompt goes in once, at the
    restarted CLI's composer, not at the composer the asking process redraws for a
    moment before it restarts (tmux; tests/test_dialogs.py has the general case)."""
    real.timings["max_starting"] = "180s"
    real.gemini(Script({"hello": "Hi, trusted by orcr"}), trusted=False, extra="trust_cwd = true\n")
    real.run("x/auto", "hello there")
    # two starts of a node CLI on a loaded machine; past max_starting, so a start that
    # hangs ends on orcr's own guard (failed, with its reason) before this wait gives up
    real.wait_idle("x/auto", 200)
    assert real.read("x/auto")["text"] == "Hi, trusted by orcr", real.why("x/auto")
    assert real.model.once_problems(["hello there"]) == []


@TMUX
def test_the_pin_covers_this_release(provider_bin, live):
    out = subprocess.run(
        [str(provider_bin / "gemini"), "--version"], capture_output=True, text=True
    )
    version = out.stdout.split()[-1]
    assert GeminiProvider().check_version(version, {}) is None
