"""The real Codex against a Responses API that answers in the many ways a real one may.

Someone else's Responses API (or the real one) does not answer as tests/fake_models
does by default: reasoning items before the message, several ``output_text`` parts
or several messages in one response, a call after some text, no optional events
(``response.content_part.*``, ``response.output_text.done``), other id formats,
another model name than the one asked for, ``response.incomplete`` and
``response.failed``, 5xx answers. Whatever it sends, a user of orcr sees each turn
end once, reads back the final answer (never the reasoning, never a tool call) and
sees a failed turn reported as failed, with the agent usable afterwards.
"""

from __future__ import annotations

import re

import pytest
from fake_models import Error, Refusal, Reply, Script, StreamError, Thinking, Tool, Wire
from real_cli.scenarios import answer, idles, turn

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


def provider_setting(real, text: str) -> None:
    """Add ``text`` to the fake's ``[model_providers.fake]`` table (read when Codex starts)."""
    config = real.cli_home / "config.toml"
    anchor = 'env_key = "FAKE_MODEL_API_KEY"\n'
    config.write_text(config.read_text().replace(anchor, anchor + text))


@TMUX
def test_answers_in_many_shapes(real):
    """One agent on a model Codex has no metadata for, one turn per shape, from a server
    that names another model, leaves out the optional events and uses long random ids:
    each turn ends once and reads back its final answer."""
    real.codex(
        Script(
            {
                "think": Reply([Thinking("pondering the question"), "The answer after thinking"]),
                "parts": Reply(["First part. ", "Second part."]),
                "messages": Reply(["First message.", "Second message."], separate=True),
                "look": [Reply(["I will run a command.", Tool.bash("echo hi")]), "It said hi."],
                "long": Reply(["An answer cut at the li"], truncated=True),
                "refuse": Reply([Refusal("I will not do that.")]),
                "nothing": Reply([]),
                "after": "Still here.",
            },
            wire=Wire(model="someone-elses-model", lean=True, ids="real"),
        )
    )
    config = real.cli_home / "config.toml"
    config.write_text(config.read_text().replace('"gpt-5-codex"', '"acme-model-7"'))
    uuid = real.run("v/shapes", "think about it")
    real.wait_idle("v/shapes")
    r = answer(real, "v/shapes")
    # Codex knows nothing of the model: it warns in its footer ("⚠ 2 warnings · f2 to
    # view", or "⚠ 1 warning" when one of them has not been raised yet), no dialog eats
    # the prompt
    assert re.search(r"⚠ \d+ warnings? ", real.screen("v/shapes")), real.screen("v/shapes")
    assert (r["turn_status"], r["text"]) == ("completed", "The answer after thinking"), real.why(
        "v/shapes"
    )
    # several output_text parts are one text; of several messages Codex's answer is the last
    r = turn(real, "v/shapes", "several parts")
    assert (r["turn_status"], r["text"]) == ("completed", "First part. Second part."), real.why(
        "v/shapes"
    )
    r = turn(real, "v/shapes", "several messages")
    assert (r["turn_status"], r["text"]) == ("completed", "Second message."), real.why("v/shapes")
    r = turn(real, "v/shapes", "look around")
    assert (r["turn_status"], r["text"]) == ("completed", "It said hi."), real.why("v/shapes")
    # response.incomplete: Codex fails the turn (and keeps the cut text on screen)
    r = turn(real, "v/shapes", "a long one")
    assert (r["turn_status"], r["text"], r["error"]) == (
        "errored",
        None,
        "Incomplete response returned, reason: max_output_tokens",
    ), real.why("v/shapes")
    # Codex 0.171 shows and keeps nothing of a refusal part: a turn with no answer
    r = turn(real, "v/shapes", "refuse this")
    assert (r["turn_status"], r["text"]) == ("completed", None), real.why("v/shapes")
    r = turn(real, "v/shapes", "say nothing")
    assert (r["turn_status"], r["text"]) == ("completed", None), real.why("v/shapes")
    out = real.orcr("agent", "read", "v/shapes", check=False)
    assert (out.returncode, out.stderr.strip()) == (
        1,
        "Error: agent v/shapes: turn 7 completed with no answer text",
    )
    r = turn(real, "v/shapes", "after that")
    assert (r["turn_status"], r["text"]) == ("completed", "Still here."), real.why("v/shapes")
    assert idles(real, uuid) == 8, real.why("v/shapes")


@TMUX
def test_overloaded_and_failed_streams(real):
    """A 5xx, a ``response.failed`` stream and an ``error`` event mid-stream are retried
    by Codex (a server using bare UUIDs as ids): one turn, its answer.
    An error that persists past the retries fails the turn, reported as such, and the
    next prompt works."""
    real.codex(
        Script(
            {
                "busy": [Error(503, "overloaded", "server_error"), "after the overload"],
                "cut": [StreamError(), "after the broken stream"],
                "event": [StreamError(event="error"), "after the error event"],
                "broken": Error(500, "the fake is broken", times=10),
                "fails": StreamError(times=10),
                "again": "working again",
            },
            wire=Wire(ids="uuid"),
        )
    )
    provider_setting(real, "request_max_retries = 1\nstream_max_retries = 1\n")
    uuid = real.run("v/errors", "busy now?")
    real.wait_idle("v/errors")
    r = answer(real, "v/errors")
    assert (r["turn_status"], r["text"]) == ("completed", "after the overload"), real.why(
        "v/errors"
    )
    r = turn(real, "v/errors", "cut it")
    assert (r["turn_status"], r["text"]) == ("completed", "after the broken stream"), real.why(
        "v/errors"
    )
    r = turn(real, "v/errors", "an error event")
    assert (r["turn_status"], r["text"]) == ("completed", "after the error event"), real.why(
        "v/errors"
    )
    r = turn(real, "v/errors", "broken now")
    assert (r["turn_status"], r["text"]) == ("errored", None), real.why("v/errors")
    assert r["error"], real.why("v/errors")  # Codex's words for a 500: "high demand"
    w = real.orcr("agent", "wait", "v/errors", check=False)
    assert w.returncode == 7 and "turn 4 errored" in w.stderr, w
    r = turn(real, "v/errors", "it fails")  # response.failed past the retries
    assert (r["turn_status"], r["text"]) == ("errored", None), real.why("v/errors")
    assert "Overloaded (fake)" in r["error"], real.why("v/errors")
    r = turn(real, "v/errors", "again please")
    assert (r["turn_status"], r["text"]) == ("completed", "working again"), real.why("v/errors")
    assert idles(real, uuid) == 6, real.why("v/errors")
