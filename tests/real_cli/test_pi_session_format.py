"""The session file the real pi writes, checked against what orcr-pi reads, and captured
as the adapter's unit fixtures (plugins/pi/tests/fixtures/real-<version>-*.jsonl).

Two conversations, the same as the fixtures of every checked release: turns (an
answer, a bash tool call, a 400 pi does not retry, Esc mid-answer) and retries (a 500
pi retries, thinking before two text blocks, an answer cut at the output limit, a
stream that fails halfway and is retried). Each checks the file orcr named
(``--session``): session format version 3, every entry of a type the reader knows,
every assistant ``stopReason`` one it maps, and orcr's reading of the turns. With
``ORCR_PI_CAPTURE=DIR`` the files are copied there as ``real-<version>-turns.jsonl`` and
``real-<version>-retries.jsonl`` (how the fixtures of a new release are made:
docs/providers/pi.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_models import Error, Hold, Reply, Script, StreamError, Thinking, Tool
from real_cli.scenarios import start, turn

orcr_pi = pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)
#: entry types of pi's session file (docs/providers/pi.md "The session file"; 1.x added
#: ``usage`` and ``context_edit``, and ``system`` messages)
ENTRY_TYPES = {
    "session", "model_change", "thinking_level_change", "message", "compaction",
    "branch_summary", "custom", "custom_message", "label", "session_info", "usage",
    "context_edit",
}  # fmt: skip
ROLES = {"user", "assistant", "toolResult", "bashExecution", "custom", "system"}
STOP_REASONS = {"stop", "length", "toolUse", "error", "aborted"}


def _version(provider_bin: Path) -> str:
    out = subprocess.run([str(provider_bin / "pi"), "--version"], capture_output=True, text=True)
    return (out.stdout + out.stderr).split()[0]


def _check_and_capture(real, path: str, provider_bin: Path, kind: str) -> list[dict]:
    session = Path(real.get(path)["agent_session"]["value"])
    entries = [json.loads(line) for line in session.read_text().splitlines() if line.strip()]
    dest = os.environ.get("ORCR_PI_CAPTURE")
    if dest:
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(session, Path(dest) / f"real-{_version(provider_bin)}-{kind}.jsonl")
    head = entries[0]
    assert (head["type"], head["version"]) == ("session", 3), head
    assert {e["type"] for e in entries} <= ENTRY_TYPES, [e["type"] for e in entries]
    messages = [e["message"] for e in entries if e["type"] == "message"]
    assert {m["role"] for m in messages} <= ROLES
    stops = {m.get("stopReason") for m in messages if m["role"] == "assistant"}
    assert stops <= STOP_REASONS, stops
    return entries


@TMUX
def test_turns_session(real):
    hold = Hold("A slowly")
    real.pi(
        Script(
            {
                "hello": "Hi there from fake",
                "tool": [Tool("bash", {"command": f"echo hi > {real.cwd}/ran"}), "ran it"],
                "fail": Error(400, "bad request (fake)", "invalid_request_error"),
                "slow": hold,
            }
        )
    )
    start(real, "f/turns")
    assert turn(real, "f/turns", "run the tool please")["text"] == "ran it"
    assert turn(real, "f/turns", "this will fail")["turn_status"] == "errored"
    real.orcr("agent", "send", "f/turns", "a slow one")
    assert hold.started.wait(60), real.why("f/turns")
    real.until_status("f/turns", "working")
    real.keys("f/turns", "Escape")
    real.until_status("f/turns", "idle")
    entries = _check_and_capture(real, "f/turns", real.bin, "turns")
    stops = [e["message"].get("stopReason") for e in entries if e["type"] == "message"]
    assert [s for s in stops if s] == ["stop", "toolUse", "stop", "error", "aborted"], stops
    s = orcr_pi.provider.summarize(real.get("f/turns")["agent_session"]["value"])
    assert [t["status"] for t in s["turns"]] == ["completed", "completed", "errored", "interrupted"]


@TMUX
def test_retries_session(real):
    real.pi(
        Script(
            {
                "retry once": [Error(500), "after the retry"],
                "think": Reply(
                    [Thinking("Let me think this through."), "thought answer", "second block"]
                ),  # fmt: skip
                "cut": Reply(["cut off ans"], truncated=True),
                "retry me": [StreamError(), "done"],
            }
        )
    )
    start(real, "f/retries", "retry once")
    assert real.read("f/retries")["text"] == "after the retry"
    assert turn(real, "f/retries", "think about it")["text"] == "thought answer\nsecond block"
    assert turn(real, "f/retries", "cut short")["text"] == "cut off ans"
    assert turn(real, "f/retries", "retry me", timeout=90)["text"] == "done"
    entries = _check_and_capture(real, "f/retries", real.bin, "retries")
    stops = [e["message"].get("stopReason") for e in entries if e["type"] == "message"]
    stops = [s for s in stops if s]
    # a 500 reaches pi only where its SDK does not retry it first (1.x: SDK retries 0)
    assert [s for s in stops if s != "error"] == ["stop", "stop", "length", "stop"], stops
    assert stops[-2:] == ["error", "stop"], stops  # the failed stream, pi's retry
