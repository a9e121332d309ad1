"""The real pi against a model API that answers in the many ways a real one may
(the shapes of test_model_variety_claude.py, through pi's ``anthropic-messages``
provider): each turn ends once, ``agent read`` gives the final answer (never the
thinking), and what pi takes as a failure is reported as an errored turn, with the
agent usable afterwards."""

from __future__ import annotations

import pytest
from fake_models import Error, Refusal, Reply, Script, StreamError, Thinking, Wire
from real_cli.scenarios import idles, turn

pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_answers_in_many_shapes(real):
    """Thinking before the answer, a redacted thinking block and two text blocks, an
    answer cut at the output limit (pi stops there: ``stopReason: "length"``), a refusal
    (pi's Anthropic provider maps it to an error), an empty answer; from a server with
    ``ping`` events, another model id, lean usage and long random ids."""
    real.pi(
        Script(
            {
                "think": Reply([Thinking("pondering the question"), "The answer after thinking"]),
                "secret": Reply([Thinking(redacted=True), "First block.", "Second block."]),
                "long": Reply(["An answer cut at the li"], truncated=True),
                "refuse": Reply([Refusal("I will not do that.")]),
                "nothing": Reply([]),
                "after": "Still here.",
            },
            wire=Wire(model="claude-other-model-9", ping=True, lean=True, ids="real"),
        )
    )
    uuid = real.run("v/shapes", "think about it")
    real.wait_idle("v/shapes")
    shapes = [("think", ("completed", "The answer after thinking"))]
    got = [("think", (real.read("v/shapes")["turn_status"], real.read("v/shapes")["text"]))]
    for prompt, want in (
        ("a secret one", ("completed", "First block.\nSecond block.")),
        ("a long one", ("completed", "An answer cut at the li")),
        ("refuse this", ("errored", None)),
        ("say nothing", ("completed", None)),
        ("after that", ("completed", "Still here.")),
    ):
        r = turn(real, "v/shapes", prompt, timeout=90)
        shapes.append((prompt, want))
        got.append((prompt, (r["turn_status"], r["text"])))
    assert got == shapes, real.why("v/shapes")
    assert idles(real, uuid) == 6, real.why("v/shapes")


@TMUX
def test_overloaded_and_failed_streams(real):
    """529 (the SDK under pi retries it) and a stream that fails halfway (pi retries it,
    2 s later): one turn each, its answer."""
    real.pi(
        Script(
            {
                "busy": [Error(529, "Overloaded", "overloaded_error"), "after the overload"],
                "cut": [StreamError(), "after the broken stream"],
                "again": "working again",
            },
            wire=Wire(ids="uuid"),
        )
    )
    uuid = real.run("v/errors", "busy now?")
    real.wait_idle("v/errors")
    r = real.read("v/errors")
    assert (r["turn_status"], r["text"]) == ("completed", "after the overload"), real.why(
        "v/errors"
    )
    r = turn(real, "v/errors", "cut it", timeout=90)
    assert (r["turn_status"], r["text"]) == ("completed", "after the broken stream"), real.why(
        "v/errors"
    )
    r = turn(real, "v/errors", "again please", timeout=90)
    assert (r["turn_status"], r["text"]) == ("completed", "working again"), real.why("v/errors")
    assert idles(real, uuid) == 3, real.why("v/errors")
