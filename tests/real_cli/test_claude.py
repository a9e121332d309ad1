"""The real Claude Code TUI driven by orcr (tests/real_cli/conftest.py sets it up)."""

from __future__ import annotations

import pytest
from fake_models import Script

pytestmark = pytest.mark.parametrize("live", ["tmux"], indirect=True)


def test_first_prompt_and_follow_ups(real):
    """A first prompt and two follow-ups, each answer read back with ``agent read``."""
    real.claude(Script({"first": "Answer one", "second": "Answer two", "third": "Answer three"}))
    uuid = real.run("c/talk", "first question")
    real.wait_idle("c/talk")
    assert real.read("c/talk")["text"] == "Answer one", real.why("c/talk")
    for n, (word, answer) in enumerate((("second", "Answer two"), ("third", "Answer three")), 2):
        r = real.orcr("agent", "send", "c/talk", f"{word} question")
        assert f"working turn {n}" in r.stdout
        real.wait_idle("c/talk")
        assert real.read("c/talk")["text"] == answer, real.why("c/talk")
    a = real.get("c/talk")
    assert (a["status"], a["turn"], a["agent_session"]["value"]) == ("idle", 3, uuid)
    assert real.model.prompts() == ["first question", "second question", "third question"]
