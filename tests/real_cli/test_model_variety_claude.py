"""The real Claude Code against a model API that answers in the many ways a real one may.

Someone else's Messages API (or the real one) does not answer as tests/fake_models
does by default: thinking blocks before the text, several text blocks, text and a
tool call in one message, ``ping`` events, another model id than the one asked for,
lean usage, long random ids, ``stop_reason: max_tokens``, overloaded answers and a
stream that fails halfway. Whatever it sends, a user of orcr sees each turn end once,
reads back the final answer (never the thinking, never a tool call) and sees a
failed turn reported as failed, with the agent usable afterwards.
"""

from __future__ import annotations

import pytest
from fake_models import Error, Refusal, Reply, Script, StreamError, Thinking, Tool, Wire
from real_cli.scenarios import answer, idles, turn

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_answers_in_many_shapes(real):
    """One agent, one turn per shape, from a server with ``ping`` events, another model
    id than the one asked for, lean usage and long random ids: each turn ends once and
    reads back its final answer."""
    notes = real.cwd / "notes.txt"
    notes.write_text("the notes say hello\n")
    real.claude(
        Script(
            {
                "think": Reply([Thinking("pondering the question"), "The answer after thinking"]),
                "secret": Reply([Thinking(redacted=True), "First block.", "Second block."]),
                "look": [
                    Reply(["I will read the notes.", Tool("Read", {"file_path": str(notes)})]),
                    "The notes say hello.",
                ],
                "long": [Reply(["An answer cut at the li"], truncated=True), "mit, and its rest."],
                "refuse": [Reply([Refusal("I will not do that.")]), "After the refusal."],
                "nothing": Reply([]),
                "after": "Still here.",
            },
            wire=Wire(model="claude-other-model-9", ping=True, lean=True, ids="real"),
        )
    )
    uuid = real.run("v/shapes", "think about it")
    real.wait_idle("v/shapes")
    r = answer(real, "v/shapes")
    assert (r["turn_status"], r["text"]) == ("completed", "The answer after thinking"), real.why(
        "v/shapes"
    )
    r = turn(real, "v/shapes", "a secret one")
    assert (r["turn_status"], r["text"]) == ("completed", "First block.\nSecond block."), real.why(
        "v/shapes"
    )
    r = turn(real, "v/shapes", "look at the notes")
    assert (r["turn_status"], r["text"]) == ("completed", "The notes say hello."), real.why(
        "v/shapes"
    )
    # cut at the output limit: Claude Code asks the model to go on, in the same turn
    r = turn(real, "v/shapes", "a long one")
    assert (r["turn_status"], r["text"]) == (
        "completed",
        "An answer cut at the limit, and its rest.",
    ), real.why("v/shapes")
    # a refusal: Claude Code notes it and asks the model once more, in the same turn
    r = turn(real, "v/shapes", "refuse this")
    assert (r["turn_status"], r["text"]) == ("completed", "After the refusal."), real.why(
        "v/shapes"
    )
    # no content at all (twice: Claude Code asks once more): the turn ends, with no text
    r = turn(real, "v/shapes", "say nothing")
    assert (r["turn_status"], r["text"]) == ("completed", None), real.why("v/shapes")
    out = real.orcr("agent", "read", "v/shapes", check=False)
    assert (out.returncode, out.stderr.strip()) == (
        1,
        "Error: agent v/shapes: turn 6 completed with no answer text",
    )
    r = turn(real, "v/shapes", "after that")
    assert (r["turn_status"], r["text"]) == ("completed", "Still here."), real.why("v/shapes")
    a = real.get("v/shapes")
    assert (a["status"], a["turn"]) == ("idle", 7)
    assert idles(real, uuid) == 7, real.why("v/shapes")


@TMUX
def test_overloaded_and_failed_streams(real, monkeypatch):
    """529 overloaded and a stream that fails halfway are retried by Claude Code: one
    turn, its answer. An error that persists past the retries fails the turn, reported
    as such, and the next prompt works."""
    real.home.env["CLAUDE_CODE_MAX_RETRIES"] = "1"
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")
    real.claude(
        Script(
            {
                "busy": [Error(529, "Overloaded", "overloaded_error"), "after the overload"],
                "cut": [StreamError(), "after the broken stream"],
                "broken": Error(500, "the fake is broken", times=10),
                "fails": StreamError(times=10),
                "again": "working again",
            },
            wire=Wire(ids="uuid"),
        )
    )
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
    r = turn(real, "v/errors", "broken now")
    assert (r["turn_status"], r["text"]) == ("errored", None), real.why("v/errors")
    assert "the fake is broken" in r["error"]
    w = real.orcr("agent", "wait", "v/errors", check=False)
    assert w.returncode == 7 and "errored: API Error: 500 the fake is broken" in w.stderr, w
    # A stream failing mid-way past the retries: Claude Code 2.1.332 keeps the partial
    # text as an ordinary answer (stop_reason end_turn, no error line; `claude -p` says
    # "success" with it too), so that is what the transcript, and orcr, can tell
    r = turn(real, "v/errors", "it fails")
    assert (r["turn_status"], r["text"]) == ("completed", "partial answ"), real.why("v/errors")
    r = turn(real, "v/errors", "again please")
    assert (r["turn_status"], r["text"]) == ("completed", "working again"), real.why("v/errors")
    assert idles(real, uuid) == 5, real.why("v/errors")
