"""Server-held requests: agent.wait, agent.prompt (300 ms Enter delay, wait), events.wait."""

from __future__ import annotations

import threading
import time

import orcr_testing.herdr.waits as waits
from orcr_testing.herdr.wire import LINE_AGENT, apply_tab, call, ok

from orcr_core.kit.testing import until


def agent_pane(emu, status="idle"):
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emu, LINE_AGENT)
    emu.set_agent(pane, "claude", status)
    until(lambda: "READY" in emu.screen(pane))
    return pane


def later(delay, fn, *args):
    t = threading.Timer(delay, fn, args)
    t.start()
    return t


def test_agent_wait_returns_on_status_and_fails_when_the_pane_goes(emulator):
    pane = agent_pane(emulator, "working")
    later(0.2, emulator.set_agent_status, pane, "idle")
    started = time.monotonic()
    info = ok(emulator, "agent.wait", {"target": pane, "timeout_ms": 5000})["agent"]
    assert info["agent_status"] == "idle" and time.monotonic() - started >= 0.15
    assert ok(emulator, "agent.wait", {"target": pane})["agent"]["pane_id"] == pane  # immediate
    reply = call(emulator, "agent.wait", {"target": pane, "until": ["blocked"], "timeout_ms": 200})
    assert reply["error"]["code"] == "timeout"
    closer = later(0.2, lambda: ok(emulator, "pane.close", {"pane_id": pane}))
    reply = call(emulator, "agent.wait", {"target": pane, "until": ["blocked"]})
    assert reply["error"]["code"] == "agent_not_running"
    closer.join()  # its answer can come after the wait's: not after the emulator is gone
    assert call(emulator, "agent.wait", {"target": "w1:p1"})["error"]["code"] == "agent_not_found"


def test_agent_prompt_submits_after_300ms_even_when_enter_too_early(make_emulator):
    emu = make_emulator(enter_too_early=True)
    pane = agent_pane(emu)
    assert ok(emu, "agent.prompt", {"target": pane, "text": "hi"})["type"] == "agent_prompted"
    until(lambda: "GOT:hi" in emu.screen(pane))
    sent = emu.inputs(pane)
    assert [r.delivered for r in sent] == [b"hi", b"\r"] and sent[1].at - sent[0].at >= 0.29
    assert call(emu, "agent.prompt", {"target": pane, "text": "  "})["error"]["code"] == (
        "empty_agent_prompt"
    )
    assert emu.violations == []


def test_agent_prompt_wait_follows_the_turn_or_reports_a_stall(emulator, monkeypatch):
    pane = agent_pane(emulator)
    later(0.4, emulator.set_agent_status, pane, "working")
    later(0.7, emulator.set_agent_status, pane, "idle")
    reply = ok(emulator, "agent.prompt", {"target": pane, "text": "go", "wait": {}})
    assert reply["agent"]["agent_status"] == "idle"
    monkeypatch.setattr(waits, "PROMPT_STALL", 0.3)
    reply = call(emulator, "agent.prompt", {"target": pane, "text": "again", "wait": {}})
    assert reply["error"]["code"] == "agent_prompt_stalled"


def test_events_wait_matches_a_status(emulator):
    pane = agent_pane(emulator, "working")
    later(0.2, emulator.set_agent_status, pane, "blocked")
    match = {"event": "pane_agent_status_changed", "pane_id": pane, "agent_status": "blocked"}
    event = ok(emulator, "events.wait", {"match_event": match, "timeout_ms": 3000})["event"]
    assert (
        event["data"]["agent_status"] == "blocked" and event["event"] == "pane_agent_status_changed"
    )
    reply = call(
        emulator, "events.wait", {"match_event": {"event": "tab_closed", "tab_id": "w1:t1"}}
    )
    assert reply["error"]["code"] == "unsupported_event_wait_match"


def test_a_wait_does_not_block_other_requests(emulator, monkeypatch):
    pane = agent_pane(emulator, "working")
    held = threading.Event()
    wait_status = waits._wait_status

    def observed(*args, **kwargs):
        held.set()  # the emulator is holding the agent.wait now
        return wait_status(*args, **kwargs)

    monkeypatch.setattr(waits, "_wait_status", observed)
    result: list = []
    waiter = threading.Thread(
        target=lambda: result.append(call(emulator, "agent.wait", {"target": pane}))
    )
    waiter.start()
    assert held.wait(10)
    ok(emulator, "pane.list")  # answered while the wait is still held
    assert waiter.is_alive() and result == []
    emulator.set_agent_status(pane, "done")
    waiter.join(5)
    assert result[0]["result"]["agent"]["agent_status"] == "done"
