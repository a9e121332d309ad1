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
import time
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


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_tui_that_reads_paste_and_enter_at_once_gets_its_enter_again(live, short_tmp):
    """A TUI descheduled on a loaded machine (``--fake-input-lag``) has not read the
    paste when Enter comes; it then reads both at once and takes the Enter for the
    paste's (the prompt stays in its composer). orcr's first look after the Enter saw
    the composer still empty, not yet redrawn, and took that for the prompt having left
    it: no Enter again, the agent ``working`` with no turn for good (one of the 24 in
    ``test_codex_same_prompt``, which then waited for its notify until the timeout).
    Planted: no look before the Enter and a composer without the prompt always taken
    for a landed Enter (the rule before) -> fails (not idle in 60 s). The fake Codex
    draws 0.171.0's placeholder in its empty composer; planted each -> fails: any
    composer text taken for the paste (the placeholder too); no longer look while the
    paste has not shown; no settle of slack once it first shows after the Enter."""
    configure(live, short_tmp, codex=["--fake-input-lag", "4"])
    live.start_server()
    uuid = run_agent(live, "codex", "r/lag", "lagged input", cwd=short_tmp)
    wait_idle(live, "r/lag", timeout=60)
    assert live.run("agent", "read", "r/lag", check=True).stdout == "lagged input\n"
    assert [d["confirmed"] for d in _events(live, uuid, "prompt.applied")] == [True]


class _Config:
    def duration(self, key: str) -> float:
        return 0.2  # prompt_confirm: a settle of 0.2 s times the load factor


def _confirm_over(
    monkeypatch, looks: list[str], look_takes: float = 0.0, drawn: bool = True
) -> list[int]:
    """``resubmit.confirm`` over a pane whose looks are ``looks`` (verdicts, the last
    one repeated, each screen new until the verdict repeats), each taking
    ``look_takes`` seconds; the presses it made."""
    from types import SimpleNamespace

    from orcr_core.agents import resubmit

    seq = iter(looks)
    last = {"why": None, "n": 0}

    def judge(server, agent, prompt, cache=None):
        time.sleep(look_takes)
        why = next(seq, looks[-1])
        if why != last["why"]:
            last["why"], last["n"] = why, last["n"] + 1
        return resubmit.Verdict(why, "", f"screen {last['n']}")

    presses: list[int] = []
    monkeypatch.setattr(resubmit, "judge", judge)
    monkeypatch.setattr(resubmit, "_press", lambda s, a, attempt, held: presses.append(attempt))
    monkeypatch.setattr(resubmit, "_withheld", lambda a, v, p: None)
    monkeypatch.setattr(resubmit, "SCREEN_EVERY", 0.0)
    monkeypatch.setattr(resubmit, "POLL", 0.01)
    monkeypatch.setattr(resubmit, "load_factor", lambda: 1.0)
    server = SimpleNamespace(config=_Config())
    agent = SimpleNamespace(path="u/x", uuid="u")
    assert resubmit.confirm(server, agent, "hi", lambda: False, lambda: False, drawn) is False
    return presses


def test_a_prompt_drawn_again_after_it_left_the_composer_gets_no_enter(monkeypatch):
    """Real Claude Code 2.1.332 at load (the real_cli six-agent test): the composer
    showed without the prompt, then showed it again, no spinner, for longer than the
    settle, and the model was asked 0.2-2 s before orcr's second Enter. Once the prompt
    has left the composer the Enter landed: nothing is pressed, however long it shows
    again. Planted: no ``landed`` check -> an Enter is pressed -> fails."""
    assert _confirm_over(monkeypatch, ["unsubmitted", "left"] + ["unsubmitted"] * 40) == []


def test_a_prompt_that_never_left_the_composer_is_pressed_again(monkeypatch):
    """The same look without the prompt ever leaving: the Enter was lost, so it is
    pressed again (at most ATTEMPTS - 1 times). Each look at the screen takes longer
    than the settle, as a screen capture can on a loaded machine (this unit test failed
    at load 40 with looks of a few ms and a 0.05 s settle). Planted: the look after a
    press not given its own settle (the deadline kept at the press plus one settle) ->
    [1]."""
    assert _confirm_over(monkeypatch, ["unsubmitted"] * 60, look_takes=0.25) == [1, 2]


def test_an_empty_composer_before_the_prompt_ever_showed_is_not_a_landed_enter(monkeypatch):
    """The composer not yet redrawn after the paste (``drawn`` False: the look before
    the Enter never saw the prompt), then the prompt in it, idle: the Enter was taken
    for the paste's, so it is pressed again. Planted: ``left`` counted as landed
    whether or not the prompt had shown -> [] (the prompt sits for good)."""
    looks = ["left"] * 3 + ["unsubmitted"] * 40
    assert _confirm_over(monkeypatch, looks, drawn=False) == [1, 2]
    assert _confirm_over(monkeypatch, looks, drawn=True) == []  # it had shown: landed
