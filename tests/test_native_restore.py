"""herdr's own restore of an agent and orcr's resume never bring one agent back twice
(docs/concepts.md "Only orcr resumes its agents")."""

from __future__ import annotations

import pytest

from orcr_core.testing import until


def _requeued(live, uuid: str) -> list[dict]:
    return [
        e["data"]
        for e in live.events(uuid)
        if e["kind"] == "agent.status" and e["data"]["to"] == "queued" and e["data"].get("resume")
    ]


@pytest.mark.parametrize("live", ["herdr", "herdr08"], indirect=True)
def test_a_native_restore_is_closed_before_orcr_resumes_once(live):
    """A herdr that restores agents itself (``resume_agents_on_restore``, as a server
    named by ``herdr.socket`` may) restores the agent's pane, marks included, before
    its socket answers and types the resume command into it: orcr meets that pane
    first, finds another process there, closes it and resumes its own agent once."""
    live.config(
        live.mux.config() + '[timings]\npoll_every = "50ms"\n[recovery]\nresume_lost = true\n'
    )
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "n/one", "first", check=True)
    live.run("agent", "wait", "n/one", "--timeout", "30s", check=True)
    a = live.get("n/one")
    emu = live.mux.emulator
    emu.set_agent_session(a["pane_id"], "s-native", agent="claude")  # herdr can resume it
    emu.resume_agents = True
    emu.restart()
    until(lambda: live.get("n/one")["status"] == "idle" and _requeued(live, a["uuid"]), 60)
    assert len(_requeued(live, a["uuid"])) == 1
    # one pane for the agent: the natively restored one (old launch token) is gone
    until(lambda: [p.label for p in emu.panes() if p.label] == ["n/one"], 15, what="one pane")
    assert not any(p.pending_resume for p in emu.panes())
    live.run("agent", "send", "n/one", "second", check=True)
    live.run("agent", "wait", "n/one", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "n/one", check=True).stdout == "second\n"
    assert [p.label for p in emu.panes() if p.label] == ["n/one"]
    assert live.status()["drift"]["orphan_agent_panes"] == 0
