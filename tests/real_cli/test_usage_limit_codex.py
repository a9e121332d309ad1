"""Codex's usage limit holds the codex queue until its reset (issue 38 part 5;
docs/concepts.md, "Usage limits")."""

from __future__ import annotations

import pytest
from fake_models import limits
from real_cli import scenarios


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.timeout(300)
def test_a_spent_plan_holds_codex_until_its_reset(real):
    """ChatGPT's ``usage_limit_reached`` (three hours to the reset): the real Codex ends
    the turn "You’ve hit your usage limit. ... try again at <date> <time>."; codex's
    queue is held until that reset.

    Planted: the pattern's apostrophe ASCII only -> fails (no hold: the real text's is ’)."""
    a = scenarios.usage_limit_holds(real, real.codex, limits.codex_usage_limit())
    assert a["turn_error"].startswith("You\u2019ve hit your usage limit."), a
    held = real.get("x/next")["held"]
    assert held.startswith("usage limit codex until "), held
