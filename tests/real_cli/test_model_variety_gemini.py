"""The real Gemini CLI against a model API that answers in the many ways a real one may
(the shapes of test_model_variety_claude.py, through the fake Gemini API's
``streamGenerateContent``): each turn ends once, ``agent read`` gives the final answer
(never the thoughts), and the agent stays usable after each."""

from __future__ import annotations

import pytest
from fake_models import Reply, Script, Thinking, Wire
from real_cli.scenarios import idles, turn

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_answers_in_many_shapes(real):
    """Thoughts before the answer (``thought: true`` parts), two text parts, an answer
    cut at the output limit (``MAX_TOKENS``); from a server naming another model."""
    real.gemini(
        Script(
            {
                "think": Reply([Thinking("pondering the question"), "The answer after thinking"]),
                "secret": Reply(["First part.", "Second part."]),
                "long": Reply(["An answer cut at the li"], truncated=True),
                "after": "Still here.",
            },
            wire=Wire(model="gemini-other-model-9"),
        )
    )
    uuid = real.run("v/shapes", "think about it")
    real.wait_idle("v/shapes", 120)
    shapes = [("think", ("completed", "The answer after thinking"))]
    got = [("think", (real.read("v/shapes")["turn_status"], real.read("v/shapes")["text"]))]
    for prompt, want in (
        ("a secret one", ("completed", "First part.Second part.")),
        ("a long one", ("completed", "An answer cut at the li")),
        ("after that", ("completed", "Still here.")),
    ):
        r = turn(real, "v/shapes", prompt, timeout=90)
        shapes.append((prompt, want))
        got.append((prompt, (r["turn_status"], r["text"])))
    assert got == shapes, real.why("v/shapes")
    assert idles(real, uuid) == 4, real.why("v/shapes")
