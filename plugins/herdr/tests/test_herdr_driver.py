"""HerdrDriver against the in-process emulator (strict schema mode)."""

from __future__ import annotations

import threading
import time

import pytest
from orcr_herdr.driver import HerdrDriver
from orcr_herdr.paths import session_socket
from orcr_testing.herdr.wire import LINE_AGENT

from orcr_core import dirs
from orcr_core.contracts import Driver, DriverError, PaneRef, SessionPointer, StartSpec
from orcr_core.kit.testing import until


def spec(ws: str, label: str = "proj/agent_a", argv=None, env=None) -> StartSpec:
    return StartSpec(ws, label, "/tmp", tuple(argv or LINE_AGENT), env or {"ORCR_ID": "u1"})


def test_driver_satisfies_the_contract(driver):
    assert isinstance(driver, Driver) and driver.name == "herdr"
    assert driver.socket_path == str(session_socket("orcr"))


def test_the_default_session_is_this_instances_own(config_factory, tmp_path, monkeypatch):
    """``orcr`` for the default data directory; per data directory under ORCR_HOME."""
    monkeypatch.setenv("ORCR_HOME", str(tmp_path / "a"))
    a = HerdrDriver(config_factory(session="")).session
    monkeypatch.setenv("ORCR_HOME", str(tmp_path / "b"))
    b = HerdrDriver(config_factory(session="")).session
    assert a != b and a.startswith("orcr-") and b.startswith("orcr-")
    assert b == dirs.mux_name() == "orcr-" + dirs.instance_id()
    monkeypatch.delenv("ORCR_HOME")
    assert HerdrDriver(config_factory(session="")).session == "orcr"
    assert HerdrDriver(config_factory(session="mine")).session == "mine"


@pytest.mark.parametrize("protocol, version", [(19, "0.8.0"), (20, "0.8.0"), (22, "0.9.3")])
def test_handshake_accepts_herdr_08_and_09(make_emulator, config_factory, protocol, version):
    make_emulator(protocol=protocol)
    driver = HerdrDriver(config_factory())
    facts = driver.handshake()
    assert facts["protocol"] == protocol == driver.protocol and facts["version"] == version
    assert facts["capabilities"]["live_handoff"] is True
    if protocol == 22:  # what ping reports is passed on, only what is on
        assert facts["capabilities"]["health_check"] is True
        assert facts["capabilities"]["endpoint_protocol_generation"] == 1


@pytest.mark.parametrize("protocol", [18, 21, 23])
def test_handshake_refuses_other_protocols(make_emulator, config_factory, protocol):
    """21 only existed on herdr's development branches: no release reported it."""
    make_emulator(protocol=protocol)
    with pytest.raises(DriverError) as exc:
        HerdrDriver(config_factory()).handshake()
    assert exc.value.code == "unsupported_herdr_protocol" and not exc.value.retryable
    msg = str(exc.value)
    assert f"protocol {protocol}" in msg
    assert "herdr 0.9.x (socket protocol 22) or 0.8.x (socket protocol 19 or 20)" in msg


def test_down_server_is_a_retryable_error(short_tmp, config_factory):
    driver = HerdrDriver(config_factory())
    driver.client.backoff = 0.001
    with pytest.raises(DriverError) as exc:
        driver.snapshot()
    assert exc.value.retryable and exc.value.code == "herdr_unavailable"


def test_start_runs_argv_labelled_and_closes_the_bootstrap_shell(driver, emulator):
    ws = driver.ensure_workspace("proj")
    assert ws == "w1"
    ref = driver.start(spec(ws))
    assert ref == PaneRef("w1", "w1:t2", "w1:p2")
    until(lambda: "READY" in driver.read(ref))
    panes = driver.snapshot()
    assert [(p.pane_id, p.label) for p in panes] == [("w1:p2", "proj/agent_a")]  # p1 shell gone
    assert panes[0].session == "orcr" and panes[0].terminal_id.startswith("term_")
    assert panes[0].agent is None and panes[0].agent_status == "unknown"
    assert emulator.pane("w1:p2").proc.argv == list(LINE_AGENT)
    layout = next(r for r in emulator.requests if r["method"] == "layout.apply")["params"]
    assert layout["root"]["env"] == {"ORCR_ID": "u1"} and layout["focus"] is False


def test_workspace_found_by_label_after_a_restart(driver, emulator):
    ws = driver.ensure_workspace("proj")
    assert driver.ensure_workspace("proj") == ws  # found, not created again
    ref = driver.start(spec(ws))
    other = driver.ensure_workspace("other")
    before = {p.pane_id: p for p in driver.snapshot()}
    emulator.restart()
    assert driver.ensure_workspace("proj") == ws and driver.ensure_workspace("other") == other
    after = {p.pane_id: p for p in driver.snapshot()}
    assert after.keys() == before.keys()
    assert after[ref.pane_id].label == "proj/agent_a"
    assert all(after[k].terminal_id != before[k].terminal_id for k in after)
    assert len([r for r in emulator.requests if r["method"] == "workspace.create"]) == 2


def test_two_call_rule_submits_where_one_write_would_not(make_emulator, config_factory):
    emu = make_emulator(enter_too_early=True)
    driver = HerdrDriver(config_factory())
    ws = driver.ensure_workspace("proj")
    ref = driver.start(spec(ws))
    until(lambda: "READY" in driver.read(ref))
    # the wrong way: text and Enter in one pane.send_input write
    driver.request("pane.send_input", {"pane_id": ref.pane_id, "text": "early", "keys": ["enter"]})
    time.sleep(0.5)
    assert "GOT:" not in driver.read(ref)
    driver.send_keys(ref, ["ctrl+u"])  # clear the stuck line
    mark = len(emu.inputs(ref.pane_id))
    driver.send_prompt(ref, "hello")
    # what herdr saw: the text alone in one call, Enter alone in a later one,
    # at least herdr's own 300 ms apart, and nothing swallowed
    text, enter = emu.inputs(ref.pane_id)[mark:]
    assert (text.method, text.sent, text.delivered) == ("pane.send_input", b"hello", b"hello")
    assert (enter.method, enter.sent, enter.delivered) == ("pane.send_keys", b"\r", b"\r")
    assert enter.at - text.at >= 0.3
    assert text.swallowed_enters == enter.swallowed_enters == 0
    until(lambda: "GOT:hello" in driver.read(ref))
    assert emu.violations == []


def test_session_pointer_appears_without_event_and_is_polled(driver, emulator):
    ref = driver.start(spec(driver.ensure_workspace("proj")))
    assert driver.session_pointer(ref) is None
    assert driver.agent_status(ref) is None  # a plain process: no agent
    mark = len(emulator.retained_events())
    emulator.set_agent(ref.pane_id, "claude", "working")
    emulator.set_agent_session(ref.pane_id, "abc-123")
    assert [e["event"] for e in emulator.retained_events()[mark:]] == ["pane_agent_detected"]
    assert driver.session_pointer(ref) == SessionPointer("herdr:claude", "id", "abc-123")
    assert driver.agent_status(ref) == "working"
    info = driver.snapshot()[0]
    assert (info.agent, info.agent_status) == ("claude", "working")
    assert info.agent_session == SessionPointer("herdr:claude", "id", "abc-123")


def test_close_is_idempotent_and_events_report_it(driver, emulator):
    ref = driver.start(spec(driver.ensure_workspace("proj")))
    stop = threading.Event()
    seen: list[dict] = []

    def listen():
        for event in driver.events([{"type": "pane.closed"}, {"type": "workspace.closed"}], stop):
            seen.append(event)

    listener = threading.Thread(target=listen)
    listener.start()
    try:
        driver.close(ref)
        driver.close(ref)  # already gone: not an error
        until(lambda: len(seen) >= 3)
    finally:
        stop.set()
        listener.join(5)
    # a new stream first replays the retained closure of the bootstrap shell (w1:p1);
    # order is kept per entry only (each entry emits at most one event per wake)
    closed = [e["data"] for e in seen if e["event"] == "pane_closed"]
    assert [d["pane_id"] for d in closed] == ["w1:p1", ref.pane_id]
    assert closed[1] == {"type": "pane_closed", "pane_id": ref.pane_id, "workspace_id": "w1"}
    assert [e["data"]["workspace_id"] for e in seen if e["event"] == "workspace_closed"] == ["w1"]
    with pytest.raises(DriverError) as exc:
        driver.read(ref)
    assert exc.value.code == "pane_not_found" and not exc.value.retryable


def test_dropped_connections_retry_reads_but_not_starts(driver, emulator):
    ws = driver.ensure_workspace("proj")
    emulator.drop_connections(2, when="after")
    assert [p.pane_id for p in driver.snapshot()] == ["w1:p1"]  # the read was retried
    emulator.drop_connections(1, when="after")
    with pytest.raises(DriverError) as exc:
        driver.start(spec(ws))
    assert exc.value.code == "connection_lost" and exc.value.retryable
    # the start did happen: the core finds the pane by its label, not by a second start
    assert [p.label for p in driver.snapshot()] == [None, "proj/agent_a"]
    emulator.drop_connections(2, when="before")  # nothing reached herdr: safe to resend
    driver.send_keys(PaneRef(ws, "w1:t2", "w1:p2"), ["a"])


def test_focus_marks_the_pane_focused(driver, emulator):
    ref = driver.start(spec(driver.ensure_workspace("proj")))
    driver.focus(ref)
    assert driver.request("pane.get", {"pane_id": ref.pane_id})["pane"]["focused"] is True
