"""OpenCode's usage limit holds the opencode queue (issue 38 part 5; docs/concepts.md,
"Usage limits")."""

from __future__ import annotations

import pytest
from fake_models import limits
from real_cli import scenarios


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.timeout(400)
def test_a_spent_quota_holds_opencode(real):
    """An OpenAI-compatible API's ``insufficient_quota``: the real CLI retries, its
    footer showing the error (a wait on the limit), then ends the turn with it; the
    hold comes from either, and a second opencode agent stays queued.

    Planted: USAGE_LIMIT without "exceeded your current quota" -> fails (no hold)."""
    scenarios.usage_limit_holds(real, real.opencode, limits.openai_quota(), waits=None, timeout=240)
