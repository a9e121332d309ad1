"""Claude Code's 429 holds the claude queue (issue 38 part 5; docs/concepts.md, "Usage
limits")."""

from __future__ import annotations

import pytest
from fake_models import limits
from real_cli import scenarios


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.timeout(300)
def test_a_spent_plan_holds_claude(real):
    """The Anthropic API's 429 for a spent plan, to Claude Code with an API key: it ends
    the turn ("API Error: Request rejected (429) · ..."); claude's queue is held.

    Planted: ClaudeProvider.usage_limit returning None -> fails (no hold)."""
    a = scenarios.usage_limit_holds(real, real.claude, limits.anthropic_usage_limit())
    assert "(429)" in a["turn_error"], a
