"""pi's usage limit holds the pi queue (issue 38 part 5; docs/concepts.md, "Usage
limits")."""

from __future__ import annotations

import pytest
from fake_models import limits
from real_cli import scenarios


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.timeout(300)
def test_a_spent_plan_holds_pi(real):
    """The Anthropic API's 429 for a spent plan: the real pi retries three times and
    ends the turn with it; pi's queue is held.

    Planted: PiProvider.usage_limit returning None -> fails (no hold)."""
    a = scenarios.usage_limit_holds(real, real.pi, limits.anthropic_usage_limit())
    assert a["turn_error"].startswith("429 "), a
