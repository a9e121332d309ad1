"""herdr 0.9.2's completion_seq as a second witness of a turn end (agents/witness.py)."""

from __future__ import annotations

import pytest

from orcr_core.agents import witness as witness_mod
from orcr_core.agents.witness import Witness
from orcr_core.kit.testing import until


def test_the_witness_counts_agreement_and_both_disagreements(monkeypatch):
    w = Witness()
    clock = [100.0]
    monkeypatch.setattr(witness_mod.time, "monotonic", lambda: clock[0])
    w.observe("a", "working", True, None)
    w.turn_ended("a")  # herdr has not seen it yet: pending
    assert w.pending() and w.counts["agreed"] == 0
    w.observe("a", "idle", True, 7)  # herdr catches up within the grace
    assert w.counts == {"agreed": 1, "unwitnessed": 0, "herdr_only": 0} and not w.pending()
    w.turn_ended("a")  # the same completion again: not a witness of this turn
    clock[0] += witness_mod.GRACE + 1
    w.observe("a", "idle", True, 7)
    assert w.counts["unwitnessed"] == 1
    w.observe("a", "working", True, 9)  # herdr says done, the transcript does not
    clock[0] += witness_mod.GRACE + 1
    w.observe("a", "working", True, 9)
    assert w.counts["herdr_only"] == 1
    w.observe("b", "working", False, None)  # nothing tracked there: no witness at all
    w.turn_ended("b")
    assert not w.pending() and sum(w.counts.values()) == 3


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_herdr_completion_witnesses_the_transcripts_turn_end(live):
    emu = live.mux.emulator
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "w/one", "hi", check=True)
    live.run("agent", "wait", "w/one", "--timeout", "30s", check=True)
    pane = live.get("w/one")["pane_id"]
    # orcr reports the agent's resume command to herdr 0.9 as its own (agents/native.py)
    # once it runs: after that report herdr's detection takes the pane over
    until(lambda: any(e["kind"] == "agent.resume_reported" for e in live.events()), 15)
    emu.set_agent(pane, "claude", "idle")  # herdr tracks an agent in the pane
    # herdr's completion must follow the transcript's turn end within GRACE (5 s): the
    # SDK's watch sees the end at once, where starting `orcr agent wait` under load
    # took most of that (the agreement was once counted unwitnessed: a rerun)
    with live.sdk() as o:
        o.send("w/one", "[sleep 2] two")
        emu.set_agent_status(pane, "working")
        o.wait("w/one", timeout=30)
    emu.set_agent_status(pane, "idle")  # herdr: working -> idle, completion_seq set
    assert "completion_seq" in emu.views.agent(emu.pane(pane))

    def counts():
        return live.status()["monitor"]["turn_witness"]

    until(lambda: counts()["agreed"] == 1, what="the turn end witnessed")
    live.run("agent", "send", "w/one", "three", check=True)  # herdr never sees this one
    live.run("agent", "wait", "w/one", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "w/one", check=True).stdout == "three\n"  # not held up
    c = until(lambda: (lambda c: c if c["unwitnessed"] == 1 else None)(counts()), 30)
    assert c == {"agreed": 1, "unwitnessed": 1, "herdr_only": 0}
