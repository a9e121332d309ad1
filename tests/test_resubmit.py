"""Enter is pressed again only on evidence that the first one did not land (issue 40
item 3; orcr_core/agents/resubmit.py), with the fake Claude Code on real tmux.

The fake logs every Enter it receives and what it showed then (``--fake-key-log``):
an Enter that reached a running turn or a dialog is the bug, whatever orcr's events
say. Under load Claude Code writes its transcript late (``--fake-record-delay``):
orcr, waiting for the turn there, used to press Enter again after a fixed
``prompt_confirm``, into the running turn or onto a permission question.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest
from fake_clis import configure, run_agent, wait_idle

from orcr_core.kit.testing import until


def _enters(log: Path) -> list[dict]:
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def _events(live, uuid: str, kind: str) -> list[dict]:
    return [e["data"] for e in live.events(uuid) if e["kind"] == kind]


def _into_a_turn(log: Path) -> list[dict]:
    """The Enters that reached a running turn or a dialog."""
    return [e for e in _enters(log) if e["shown"] != "idle"]


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_transcript_written_8s_late_gets_no_second_enter(live, short_tmp):
    """The turn runs (its spinner shows) while its transcript is held 8 s: no Enter
    reaches it; the decision is an event naming the running turn.
    Planted: the fixed-time re-press (Enter again after prompt_confirm) -> fails."""
    log = short_tmp / "keys.jsonl"
    configure(live, short_tmp, claude=["--fake-record-delay", "8", "--fake-key-log", str(log)])
    live.start_server()
    uuid = run_agent(live, "claude", "r/late", "[sleep 10] written late")
    wait_idle(live, "r/late", timeout=90)
    assert live.run("agent", "read", "r/late", check=True).stdout == "written late\n"
    assert _into_a_turn(log) == [], _enters(log)
    assert [e["shown"] for e in _enters(log)] == ["idle"]  # orcr's one Enter
    assert _events(live, uuid, "prompt.resubmit") == []
    withheld = _events(live, uuid, "prompt.resubmit_withheld")
    assert "running" in [w["reason"] for w in withheld], withheld


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_permission_dialog_shown_while_orcr_waits_never_gets_an_enter(live, short_tmp):
    """The turn asks permission for its tool call before its (8 s late) transcript
    shows it: the question stays unanswered, the tool never runs, and the agent
    reports the question as blocked.
    Planted: the fixed-time re-press -> fails (its Enter chose "1. Yes")."""
    log = short_tmp / "keys.jsonl"
    configure(live, short_tmp, claude=["--fake-record-delay", "8", "--fake-key-log", str(log)])
    live.start_server()
    uuid = run_agent(live, "claude", "r/ask", "[ask] run the tool")
    until(lambda: _events(live, uuid, "prompt.applied"), 90, what="the delivery done")
    assert _into_a_turn(log) == [], _enters(log)
    until(lambda: live.get("r/ask")["blocked"], 60, what="the question reported")
    assert "asks permission" in live.get("r/ask")["blocked"]
    assert _events(live, uuid, "prompt.resubmit") == []
    transcript = glob.glob(str(short_tmp / "claude" / "projects" / "*" / f"{uuid}.jsonl"))
    records = [json.loads(ln) for ln in Path(transcript[0]).read_text().splitlines()]
    results = [
        b
        for r in records
        if r["type"] == "user" and isinstance(r["message"]["content"], list)
        for b in r["message"]["content"]
        if b.get("type") == "tool_result"
    ]
    assert results == []  # nobody answered: the tool did not run
    withheld = _events(live, uuid, "prompt.resubmit_withheld")
    assert {"dialog", "running"} & {w["reason"] for w in withheld}, withheld


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_prompt_whose_enter_was_lost_is_submitted_again(live, short_tmp):
    """The TUI loses the first Enter (the text stays in its composer, no turn runs):
    orcr presses Enter again, once, and says why; the prompt reaches the turn once.
    Planted: judge() never reporting ``unsubmitted`` -> fails (the prompt sits)."""
    log = short_tmp / "keys.jsonl"
    configure(live, short_tmp, claude=["--fake-drop-enters", "1", "--fake-key-log", str(log)])
    live.start_server()
    uuid = run_agent(live, "claude", "r/lost", "lost enter")
    wait_idle(live, "r/lost", timeout=90)
    assert live.run("agent", "read", "r/lost", check=True).stdout == "lost enter\n"
    enters = _enters(log)
    assert [(e["shown"], e["dropped"]) for e in enters] == [("idle", True), ("idle", False)]
    assert all(e["composer"] == "lost enter" for e in enters), enters
    pressed = _events(live, uuid, "prompt.resubmit")
    assert [p["attempt"] for p in pressed] == [1], pressed
    assert "still in the composer" in pressed[0]["why"]
    assert len(_events(live, uuid, "prompt.resubmit_applied")) == 1
    assert [d["confirmed"] for d in _events(live, uuid, "prompt.applied")] == [True]
