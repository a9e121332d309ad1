"""The real Claude Code TUI driven by orcr (tests/real_cli/conftest.py sets it up)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from fake_models import Hold, RateLimit, Script, Text, Tool
from orcr_claude import ClaudeProvider
from real_cli import scenarios

from orcr_core.kit.testing import until

# orcr on real tmux; the driver-facing scenarios also on the herdr emulator, which
# hosts the real TUIs on real PTYs (rendered with pyte)
TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)
BOTH = pytest.mark.parametrize("live", ["tmux", "herdr"], indirect=True)


@BOTH
def test_first_prompt_and_follow_ups(real):
    """A first prompt and two follow-ups, each answer read back with ``agent read``;
    the session orcr follows is the one it gave Claude Code (the agent's uuid), and
    the usage read from the transcript is what the API reported."""
    uuid = scenarios.first_prompt_and_follow_ups(real, real.claude)
    assert real.get("x/talk")["agent_session"]["value"] == uuid
    scenarios.usage_as_reported(real, "x/talk", turns=3)


@BOTH
def test_slow_turn_is_working_then_idle(real):
    """A turn whose answer streams until released is ``working`` all along, then ``idle``
    with the whole answer."""
    hold = Hold("A slowly streamed answer")
    real.claude(Script({"slow": hold}))
    real.run("c/slow", "a slow one")
    assert hold.started.wait(60), real.why("c/slow")
    real.until_status("c/slow", "working")
    real.until_screen("c/slow", "esc to interrupt")  # the TUI shows its turn running
    assert real.status("c/slow") == "working"
    hold.release()
    real.wait_idle("c/slow")
    assert real.read("c/slow")["text"] == "A slowly streamed answer"


@TMUX
def test_streamed_chunks_and_a_rate_limit_retry(real):
    """Slow chunks and a 429 the CLI retries after: one turn, one answer."""
    real.claude(
        Script(
            {"busy": [RateLimit(retry_after=1), Text("after the wait, " * 3 + "done", delay=0.05)]}
        )
    )
    real.run("c/busy", "busy now?")
    real.wait_idle("c/busy")
    read = real.read("c/busy")
    assert (read["text"], read["turn_status"]) == ("after the wait, " * 3 + "done", "completed")
    answers = [r.answer for r in real.model.conversation()]
    assert answers[:2] == ["ratelimit", "text"], real.why("c/busy")


@BOTH
def test_permission_prompt_is_reported_blocked_and_answered_with_send_key(real):
    """A Bash call asks for permission: the turn stays ``working`` and the agent is
    blocked with the question and the command (``agent get``/``ls``); ``agent send
    --key enter`` answers "1. Yes", the command runs and the turn ends with its answer."""
    marker = real.tmp / "ran-it"
    real.claude(Script({"make": [Tool.bash(f"touch {marker}"), "made the file"]}))
    real.run("c/ask", "make a file")
    real.until_screen("c/ask", "Do you want to proceed?", timeout=60)
    a = real.until_blocked("c/ask", "Do you want to proceed?")
    assert a["status"] == "working" and f"`touch {marker}`" in a["blocked"], a
    assert "orcr agent send c/ask --key enter" in a["blocked"]
    assert "working (blocked)" in real.orcr("agent", "ls").stdout
    assert not marker.exists()
    assert [r.answer for r in real.model.conversation()] == ["tool"]
    real.orcr("agent", "send", "c/ask", "--key", "enter")
    real.wait_idle("c/ask")
    assert marker.exists()
    assert real.read("c/ask")["text"] == "made the file"
    assert real.get("c/ask")["blocked"] is None


@BOTH
def test_interrupted_turn(real):
    """Esc in the pane interrupts a running turn: the agent is ``idle`` again, the turn
    ``interrupted`` with no answer, and the next prompt works."""
    hold = Hold("never finished")
    real.claude(Script({"long": hold, "again": "second answer"}))
    real.run("c/int", "a long one")
    assert hold.started.wait(60), real.why("c/int")
    real.until_status("c/int", "working")
    real.keys("c/int", "Escape")
    assert hold.aborted.wait(30), real.why("c/int")
    r = real.orcr("agent", "wait", "c/int", "--timeout", "60s", check=False, timeout=90)
    assert r.returncode == 7 and "interrupted" in (r.stdout + r.stderr), real.why("c/int", r.stderr)
    a = real.get("c/int")
    assert (a["status"], a["turn_status"]) == ("idle", "interrupted")
    real.orcr("agent", "send", "c/int", "again please")
    real.wait_idle("c/int")
    assert real.read("c/int")["text"] == "second answer"


@TMUX
def test_subagent_lines_never_end_the_turn(real):
    """A subagent (the Task/Agent tool) answers and ends in its own transcript lines
    (inline ``isSidechain`` lines in 1.0.x, a ``subagents/`` file later) while the main
    agent's turn is still running: the agent stays ``working``; the answer read back is
    the main agent's own, never the subagent's.

    Claude Code up to 2.0.x waits for the subagent (its result is the Task call's
    result); 2.1.332 runs it in the background: the helper's task-notification, queued
    while the main answer streamed, makes it answer once more after it, which orcr
    follows as a turn started in the pane. (A helper still running at the main answer:
    the next test.)"""
    main = Hold("main final answer")
    real.claude(
        Script(
            {"delegate": [Tool.task("helper job"), main, "after the helper"],
             "helper job": "subagent words"}
        )
    )  # fmt: skip
    real.run("c/sub", "delegate this")
    assert main.started.wait(60), real.why("c/sub")
    until(
        lambda: any(r.prompt == "helper job" for r in real.model.conversation()),
        30,
        "the subagent's request",
    )
    projects = real.cli_home / "projects"
    sub_done = until(
        lambda: [p for p in projects.rglob("*.jsonl") if "subagent words" in p.read_text()],
        30,
        "the subagent's answer in a transcript",
    )
    assert sub_done
    assert real.status("c/sub") == "working", real.why("c/sub")
    held = next(r for r in real.model.conversation() if r.answer == "hold")
    waited = "subagent words" in json.dumps(held.body["messages"][-1])  # the Task's result
    main.release()
    if waited:
        expected = "main final answer"
    else:  # a background helper: Claude Code tells the main agent it finished
        until(lambda: len(real.model.conversation()) == 4, 30, "the main agent's last request")
        expected = "after the helper"
    real.wait_idle("c/sub")
    assert real.read("c/sub")["text"] == expected, real.why("c/sub")


@TMUX
def test_a_turn_waits_for_its_background_agents(real):
    """The main agent answers while its (background) subagent still runs: Claude Code
    ends that response ("Waiting for 1 background agent to finish") but the turn is not
    over; it stays ``working`` until the subagent reports and the main agent answers
    once more by itself, and that answer is the turn's. One turn, never ``idle`` between."""
    helper = Hold("subagent words")
    real.claude(
        Script(
            {"delegate": [Tool.task("helper job"), "main final answer", "after the helper"],
             "helper job": helper}
        )
    )  # fmt: skip
    uuid = real.run("c/bg", "delegate this")
    assert helper.started.wait(60), real.why("c/bg")
    try:  # a background helper: the main agent goes on while the helper is held
        until(lambda: len(real.model.conversation()) >= 3, 20, "the main agent going on")
    except AssertionError:
        pytest.skip("this release runs subagents in the foreground (up to 2.0.x)")
    real.until_screen("c/bg", "Waiting for 1 background agent", timeout=60)
    since = time.monotonic()  # well past the adapter's settle time (3s): still working
    until(lambda: time.monotonic() > since + 5, what="5s of waiting")
    assert real.status("c/bg") == "working", real.why("c/bg")
    helper.release()
    real.wait_idle("c/bg")
    a = real.get("c/bg")
    assert (a["turn"], a["turn_status"]) == (1, "completed")
    assert real.read("c/bg")["text"] == "after the helper", real.why("c/bg")
    statuses = [e["data"]["to"] for e in real.home.events(uuid) if e["kind"] == "agent.status"]
    assert statuses == ["starting", "working", "idle"], statuses


@TMUX
def test_kill(real):
    hold = Hold("never finished")
    real.claude(Script({"long": hold}))
    scenarios.kill_a_working_agent(real, hold)


@TMUX
def test_turn_timeout(real):
    hold = Hold("never finished")
    real.claude(Script({"long": hold}))
    scenarios.turn_timeout(real, hold)


@TMUX
def test_gc(real):
    real.timings["gc_after"] = "2s"
    real.claude(Script())
    scenarios.gc_an_idle_agent(real)


@TMUX
def test_resume_continues_the_session(real):
    """``claude --resume <session id>``: the next request carries the first prompt."""
    real.claude(Script({"after the resume": "resumed answer"}))

    def history_has(body, prompt):
        return prompt in json.dumps(body.get("messages"))

    scenarios.resume_an_exited_agent(real, "remember the word octopus", history_has)


@TMUX
def test_the_pin_covers_this_release(provider_bin, live):
    """The tier runs with ``allow_unpinned`` so a new release can be vetted; once it
    passes, the adapter's pin must include it (docs/providers/real-cli.md)."""
    out = subprocess.run(
        [str(provider_bin / "claude"), "--version"], capture_output=True, text=True
    )
    version = out.stdout.split()[0]
    assert ClaudeProvider().check_version(version, {}) is None
