"""Event envelopes, delivery pacing, replay and the close-event quirks."""

from __future__ import annotations

import json
import socket
import time

from orcr_testing.herdr.wire import LINE_AGENT, apply_tab, ok

from orcr_core.kit.testing import until


def names(emu, since: int = 0) -> list[tuple[str, dict]]:
    return [(e["event"], e["data"]) for e in emu.retained_events()[since:]]


class Subscriber:
    """A raw ``events.subscribe`` connection that records arrival times."""

    def __init__(self, emu, subscriptions, rid="sub1"):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(emu.socket_path)
        line = {"id": rid, "method": "events.subscribe", "params": {"subscriptions": subscriptions}}
        self.sock.sendall((json.dumps(line) + "\n").encode())
        self.file = self.sock.makefile("rb")
        self.ack = json.loads(self.file.readline())

    def read(self, n: int, timeout: float = 5.0) -> list[tuple[float, dict]]:
        self.sock.settimeout(timeout)
        out = []
        for _ in range(n):
            line = self.file.readline()
            out.append((time.monotonic(), json.loads(line)))
        return out

    def close(self):
        self.file.close()
        self.sock.close()


def test_envelope_a_and_replay_of_retained_events(emulator):
    ok(emulator, "workspace.create", {"label": "proj", "cwd": "/tmp"})
    sub = Subscriber(emulator, [{"type": "pane.created"}, {"type": "workspace.created"}])
    try:
        assert sub.ack == {"id": "sub1", "result": {"type": "subscription_started"}}
        events = [e for _, e in sub.read(2)]  # both happened before the subscription
        by_name = {e["event"]: e for e in events}
        assert by_name["pane_created"]["data"]["type"] == "pane_created"
        assert by_name["pane_created"]["data"]["pane"]["pane_id"] == "w1:p1"
        assert by_name["workspace_created"]["data"]["workspace"]["label"] == "proj"
    finally:
        sub.close()


def test_at_most_one_event_per_entry_per_tick(emulator):
    for i in range(5):
        emulator.publish("tab_focused", {"tab_id": f"w1:t{i + 1}", "workspace_id": "w1"})
    started = time.monotonic()
    sub = Subscriber(emulator, [{"type": "tab.focused"}])
    try:
        got = sub.read(5)
    finally:
        sub.close()
    assert [e["data"]["tab_id"] for _, e in got] == [f"w1:t{i + 1}" for i in range(5)]
    # paced by the 100 ms wake (five wakes at least), not one burst
    assert got[-1][0] - started >= 0.45, [t - started for t, _ in got]


def test_ring_keeps_the_last_512_events(emulator):
    for i in range(600):
        emulator.publish("workspace_focused", {"workspace_id": f"w{i}"})
    retained = emulator.retained_events()
    assert len(retained) == 512
    assert retained[0]["data"]["workspace_id"] == "w88"
    sub = Subscriber(emulator, [{"type": "workspace.focused"}])
    try:
        assert sub.read(1)[0][1]["data"]["workspace_id"] == "w88"  # older ones are lost
    finally:
        sub.close()


def test_status_stream_uses_dotted_envelope_and_only_reaches_pane_subscribers(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emulator, LINE_AGENT)
    emulator.set_agent(pane, "claude", "idle")
    filtered = Subscriber(emulator, [{"type": "pane.agent_status_changed", "pane_id": pane,
                                      "agent_status": "idle"}], rid="f")  # fmt: skip
    plain = Subscriber(emulator, [{"type": "pane.agent_status_changed", "pane_id": pane}])
    try:
        first = filtered.read(1)[0][1]  # the pane is already idle: sent at once
        assert first == {
            "event": "pane.agent_status_changed",
            "data": {
                "pane_id": pane,
                "workspace_id": "w1",
                "agent_status": "idle",
                "agent": "claude",
            },
        }
        emulator.set_agent_status(pane, "working")
        emulator.set_agent_status(pane, "idle")
        changes = [e["data"]["agent_status"] for _, e in plain.read(2)]
        assert changes == ["working", "idle"]
        assert filtered.read(1)[0][1]["data"]["agent_status"] == "idle"
    finally:
        filtered.close()
        plain.close()
    assert not any("status" in name for name, _ in names(emulator))  # never in the ring


def test_subscribing_to_a_missing_pane_echoes_the_probe_id(emulator):
    from orcr_testing.herdr.wire import call

    reply = call(
        emulator,
        "events.subscribe",
        {
            "subscriptions": [
                {"type": "pane.created"},
                {"type": "pane.agent_status_changed", "pane_id": "w7:p7"},
            ]
        },  # fmt: skip
        rid="s9",
    )
    assert reply["id"] == "s9:sub:1:probe" and reply["error"]["code"] == "pane_not_found"


def test_close_event_quirks(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})  # w1: t1/p1 shell
    agent = apply_tab(emulator, LINE_AGENT)  # w1:t2/p2
    mark = len(emulator.retained_events())
    ok(emulator, "pane.close", {"pane_id": "w1:p1"})  # last pane of t1, ws has t2
    assert [n for n, _ in names(emulator, mark)] == ["pane_closed"]  # the tab vanishes silently
    assert [t["tab_id"] for t in ok(emulator, "tab.list", {})["tabs"]] == ["w1:t2"]

    mark = len(emulator.retained_events())
    ok(emulator, "pane.close", {"pane_id": agent})  # last pane of the workspace
    assert [n for n, _ in names(emulator, mark)] == ["pane_closed", "workspace_closed"]
    assert ok(emulator, "workspace.list")["workspaces"] == []

    ok(emulator, "workspace.create", {"cwd": "/tmp"})  # w2
    ok(emulator, "tab.create", {"workspace_id": "w2"})
    mark = len(emulator.retained_events())
    ok(emulator, "tab.close", {"tab_id": "w2:t1"})
    assert [n for n, _ in names(emulator, mark)] == ["tab_closed"]
    mark = len(emulator.retained_events())
    ok(emulator, "tab.close", {"tab_id": "w2:t2"})
    assert [n for n, _ in names(emulator, mark)] == ["tab_closed", "workspace_closed"]

    ok(emulator, "workspace.create", {"cwd": "/tmp"})  # w3
    apply_tab(emulator, LINE_AGENT, ws="w3")
    mark = len(emulator.retained_events())
    ok(emulator, "workspace.close", {"workspace_id": "w3"})
    assert [n for n, _ in names(emulator, mark)] == ["workspace_closed"]


def test_process_exit_emits_pane_exited_only(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    ok(emulator, "pane.close", {"pane_id": "w1:p1"})  # fresh start: no workspace
    ok(emulator, "workspace.create", {"cwd": "/tmp"})  # w2 with its shell
    quick = apply_tab(emulator, ["sh", "-c", "sleep 0.2"], ws="w2")
    mark = len(emulator.retained_events())
    until(lambda: quick not in [p["pane_id"] for p in ok(emulator, "pane.list")["panes"]])
    assert names(emulator, mark) == [("pane_exited", {"type": "pane_exited", "pane_id": quick,
                                                      "workspace_id": "w2"})]  # fmt: skip
    # the shell is the last pane; when it exits the workspace disappears without an event
    mark = len(emulator.retained_events())
    ok(emulator, "pane.send_text", {"pane_id": "w2:p1", "text": "exit\r"})
    until(lambda: ok(emulator, "workspace.list")["workspaces"] == [])
    assert [n for n, _ in names(emulator, mark)] == ["pane_exited"]


def test_stream_closes_when_the_server_stops(emulator):
    sub = Subscriber(emulator, [{"type": "pane.created"}])
    sub.sock.settimeout(5)
    emulator.stop()
    assert sub.file.readline() == b""
    sub.close()
