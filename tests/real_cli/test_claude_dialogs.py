"""A dialog never eats a prompt, with the real Claude Code (issue 14 item 2).

The ``real`` fixture trusts its project folder up front; these tests start agents in a
fresh folder neither CLI has been told to trust (a new worktree, the usual case), so
the real folder-trust question shows before the input.
"""

from __future__ import annotations

import json
import time

import pytest
from fake_models import Script
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)
BOTH = pytest.mark.parametrize("live", ["tmux", "herdr"], indirect=True)


@BOTH
def test_claude_untrusted_folder_blocks_then_answered_prompt_goes_once(real):
    """The agent waits in ``starting`` with the reason (it used to die choosing
    "No, exit"); answered with ``agent send --key``, the prompt reaches the model once."""
    # the guard must not end it while it asks: 15 s, above a first draw under load (5 s
    # ended it before Claude Code drew at load 18), and waited out once it asks
    real.timings["max_starting"] = "15s"
    real.claude(Script({"hello": "Hi from a fresh folder"}))
    cwd = scenarios.fresh_folder(real)
    real.run("c/fresh", "hello there", cwd=cwd)
    real.until_blocked("c/fresh", f"Claude Code asks whether to trust {cwd}", timeout=90)
    time.sleep(16)  # an observation window: longer than the guard
    a = real.until_blocked("c/fresh", f"Claude Code asks whether to trust {cwd}", timeout=1)
    assert a["status"] == "starting", real.why("c/fresh")
    screen = real.screen("c/fresh")
    assert real.model.prompts() == []
    if "Do you trust the files in this folder?" in screen:  # 1.0.x: opens on "1. Yes, proceed"
        keys = ["--key", "enter"]
    else:  # 2.x: "Quick safety check", opens on "No, exit"
        assert "Quick safety check" in screen, real.why("c/fresh")
        keys = ["--key", "down", "--key", "enter"]
    real.orcr("agent", "send", "c/fresh", *keys)
    real.wait_idle("c/fresh", timeout=90)
    assert real.read("c/fresh")["text"] == "Hi from a fresh folder", real.why("c/fresh")
    assert real.model.prompts() == ["hello there"]
    state = json.loads((real.cli_home / ".claude.json").read_text())
    assert state["projects"][str(cwd)]["hasTrustDialogAccepted"] is True


@BOTH
def test_claude_trust_cwd_answers_the_trust_question(real):
    real.claude(Script({"hello": "Hi, trusted by orcr"}), extra="trust_cwd = true\n")
    cwd = scenarios.fresh_folder(real)
    uuid = real.run("c/auto", "hello again", cwd=cwd)
    real.wait_idle("c/auto", timeout=90)
    assert real.read("c/auto")["text"] == "Hi, trusted by orcr", real.why("c/auto")
    assert real.model.prompts() == ["hello again"]
    kinds = [e["kind"] for e in real.home.events(uuid)]
    assert kinds.count("agent.dialog_answered") == 1 and "agent.blocked" not in kinds
    assert kinds.count("prompt.requested") == 1
