"""The real Codex TUI driven by orcr (tests/real_cli/conftest.py sets it up)."""

from __future__ import annotations

import pytest
from fake_models import Script

pytestmark = pytest.mark.parametrize("live", ["tmux"], indirect=True)


def test_first_prompt_and_follow_ups(real):
    """A first prompt and two follow-ups, each answer read back with ``agent read``;
    orcr follows the thread the prompt went to (notify reports its id)."""
    real.codex(Script({"first": "Answer one", "second": "Answer two", "third": "Answer three"}))
    real.run("x/talk", "first question")
    real.wait_idle("x/talk")
    assert real.read("x/talk")["text"] == "Answer one", real.why("x/talk")
    for n, (word, answer) in enumerate((("second", "Answer two"), ("third", "Answer three")), 2):
        r = real.orcr("agent", "send", "x/talk", f"{word} question")
        assert f"working turn {n}" in r.stdout
        real.wait_idle("x/talk")
        assert real.read("x/talk")["text"] == answer, real.why("x/talk")
    a = real.get("x/talk")
    assert (a["status"], a["turn"]) == ("idle", 3)
    assert a["agent_session"]["kind"] == "id"
    assert real.model.prompts() == ["first question", "second question", "third question"]
