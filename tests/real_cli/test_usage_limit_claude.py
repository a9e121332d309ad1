"""Claude Code's usage limit holds the claude queue (issue 38 part 5; docs/concepts.md,
"Usage limits")."""

from __future__ import annotations

import pytest
from fake_models import limits
from real_cli import scenarios


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.timeout(300)
def test_a_spent_plan_holds_claude_until_its_reset(real):
    """The Anthropic API's 429 for a spent plan, to Claude Code logged in to a claude.ai
    plan: the real CLI ends the turn ("You've hit your 5-hour limit · resets 12:24am
    (UTC)") and waits to go on by itself at the reset ("Continuing automatically at
    12:24am · Esc to cancel"); the agent stays ``working (waiting: usage limit until
    …)`` while that line shows (orcr_core/agents/limit_wait.py), and claude's queue is
    held until that reset.

    Planted: ClaudeProvider.usage_limit returning None -> fails (no hold)."""

    def plan(script):
        return real.claude(script, plan=True)

    a = scenarios.usage_limit_holds(real, plan, limits.anthropic_usage_limit(), waits=True)
    assert a["waiting"].startswith("usage limit until "), a
    assert real.get("x/next")["held"].startswith("usage limit claude until "), real.get("x/next")
    real.until_screen("x/lim", "Continuing automatically at ")
