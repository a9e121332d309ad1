"""Gemini CLI's usage limit holds the gemini queue (issue 38 part 5; docs/concepts.md,
"Usage limits")."""

from __future__ import annotations

import pytest
from fake_models import limits
from real_cli import scenarios


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.timeout(300)
def test_a_spent_daily_quota_holds_gemini_while_it_asks(real):
    """The Gemini API's 429 for a spent daily quota: the real CLI asks "Keep trying /
    Stop"; the agent is working, waiting on the limit, and gemini's queue is held.

    Planted: screen.usage_limit not consulted -> fails (no hold within the wait)."""
    a = scenarios.usage_limit_holds(real, real.gemini, limits.gemini_daily(), waits=True)
    assert "Gemini CLI asks to keep trying or stop" in a["waiting"], a
