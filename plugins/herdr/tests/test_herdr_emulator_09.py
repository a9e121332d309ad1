"""The emulator's herdr 0.9.3 dialect (socket protocol 22, HERDR-0.9.md §11), and
that the 0.8 dialect keeps its own schema and behaviour."""

from __future__ import annotations

import hashlib
import json
import re
import socket
from pathlib import Path

import orcr_testing.herdr
import pytest
from orcr_testing.herdr.schema import VENDORED, VENDORED_09, checker_for
from orcr_testing.herdr.wire import call, ok, raw


def test_the_09_schema_is_vendored_with_its_provenance():
    here = Path(orcr_testing.herdr.__file__).parent / "herdr_schema"
    notice = (here / "NOTICE").read_text()
    block = notice[notice.index("herdr-api-0.9.schema.json (herdr 0.9") :]
    digest = re.search(r"sha256\s+([0-9a-f]{64})", block).group(1)
    assert hashlib.sha256(VENDORED_09.read_bytes()).hexdigest() == digest
    assert "a514529345330c05daed2cd60f81af553e2766de" in block
    assert checker_for(22).protocol == 22 and checker_for(20).protocol == 20
    assert "pane.clear" in checker_for(22).methods and "pane.clear" not in checker_for(20).methods


def test_ping_answers_093_with_its_capabilities(emulator09):
    pong = ok(emulator09, "ping")
    assert (pong["version"], pong["protocol"]) == ("0.9.3", 22)
    caps = pong["capabilities"]
    assert caps["health_check"] and caps["ssh_agent_registration"] and caps["surface_interest"]
    assert caps["endpoint_protocol_generation"] == 1
    assert (emulator09.rows, emulator09.cols) == (40, 120)  # the 0.9 headless size


@pytest.mark.parametrize("protocol", [20, 22])
def test_each_protocol_validates_against_its_own_schema(make_emulator, protocol):
    """0.8 traffic keeps the 0.8 schema: a 0.9-only method is a violation there, and
    a method 0.9.2 removed is one on 22."""
    emu = make_emulator(protocol=protocol)
    assert emu.checker.path == (VENDORED_09 if protocol == 22 else VENDORED)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    call(emu, "pane.clear", {"pane_id": "w1:p1"})
    call(emu, "pane.graphics.info", {"pane_id": "w1:p1"})
    bad = [v.message["method"] for v in emu.violations if v.kind == "request"]
    assert bad == (["pane.graphics.info"] if protocol == 22 else ["pane.clear"])


@pytest.mark.parametrize("protocol, echoed", [(20, ""), (22, "r8")])
def test_error_replies_keep_the_request_id_on_22(make_emulator, protocol, echoed):
    """0.9.2+: a decodable request's string id is echoed in every error reply;
    invalid JSON still gets ``""`` (HERDR-0.9.md §3)."""
    emu = make_emulator(protocol=protocol)
    reply = call(emu, "pane.get", {}, rid="r8")  # missing pane_id
    assert reply["id"] == echoed and reply["error"]["code"] == "invalid_request", reply
    reply = call(emu, "pane.get", {"pane_id": "w9:p9"}, rid="r9")
    assert (reply["id"], reply["error"]["code"]) == ("r9", "pane_not_found")
    assert json.loads(raw(emu.socket_path, b"{not json\n"))["id"] == ""


def test_removed_methods_answer_unknown_method_with_the_id(make_emulator):
    emu = make_emulator(protocol=22)
    for method in ("pane.graphics.set", "no.such.method"):
        reply = call(emu, method, {}, rid="r7")
        assert reply == {"id": "r7", "error": reply["error"]}, reply
        assert reply["error"]["code"] == "unknown_method", reply


class Sub:
    """A raw ``events.subscribe`` connection."""

    def __init__(self, emu, subscriptions, rid="sub1"):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(emu.socket_path)
        line = {"id": rid, "method": "events.subscribe", "params": {"subscriptions": subscriptions}}
        self.sock.sendall((json.dumps(line) + "\n").encode())
        self.file = self.sock.makefile("rb")
        self.ack = json.loads(self.file.readline())

    def lines(self, timeout: float = 3.0) -> list[dict]:
        """Everything until the server closes the connection or ``timeout`` passes."""
        self.sock.settimeout(timeout)
        out = []
        try:
            while line := self.file.readline():
                out.append(json.loads(line))
        except TimeoutError:
            pass
        return out

    def close(self):
        self.file.close()
        self.sock.close()


def test_subscriptions_start_at_the_live_edge_and_drain_in_batches(emulator09):
    for i in range(5):
        emulator09.publish("tab_focused", {"tab_id": f"w1:t{i + 1}", "workspace_id": "w1"})
    sub = Sub(emulator09, [{"type": "tab.focused"}])
    try:
        assert sub.ack == {"id": "sub1", "result": {"type": "subscription_started"}}
        for i in range(5, 10):
            emulator09.publish("tab_focused", {"tab_id": f"w1:t{i + 1}", "workspace_id": "w1"})
        got = sub.lines(timeout=0.5)  # one wake delivers them all
    finally:
        sub.close()
    assert [e["data"]["tab_id"] for e in got] == [f"w1:t{i + 1}" for i in range(5, 10)]


def test_events_lost_is_an_error_reply_with_the_subscribe_id_then_close(emulator09):
    sub = Sub(emulator09, [{"type": "pane.created"}], rid="s-42")
    try:
        emulator09.lose_events()
        got = sub.lines()
    finally:
        sub.close()
    assert got == [{"id": "s-42", "error": got[0]["error"]}] and got[0]["error"]["code"] == (
        "events_lost"
    )
    assert emulator09.events_lost_sent == 1
    ok(emulator09, "ping")  # other clients stay connected


def test_an_overrun_of_the_ring_is_reported_not_skipped(emulator09):
    sub = Sub(emulator09, [{"type": "workspace.focused"}], rid="s1")
    try:
        # 600 events between two wakes (straight into the ring, no validation on the
        # way in, so it takes microseconds): more than the ring holds
        for i in range(600):
            emulator09.hub.publish("workspace_focused", {"workspace_id": f"w{i}"})
        got = sub.lines()
    finally:
        sub.close()
    assert got[-1]["error"]["code"] == "events_lost" and got[-1]["id"] == "s1"


def test_events_lost_while_the_subscription_initialises(emulator09):
    emulator09.lose_events(open_streams=False, next_subscriptions=1)
    first = Sub(emulator09, [{"type": "pane.created"}], rid="a")
    second = Sub(emulator09, [{"type": "pane.created"}], rid="b")
    try:
        assert first.ack["result"]["type"] == "subscription_started"
        assert [m["error"]["code"] for m in first.lines()] == ["events_lost"]
        ok(emulator09, "workspace.create", {"cwd": "/tmp"})
        got = second.lines(timeout=1.0)
        assert [m["event"] for m in got] == ["pane_created"]
    finally:
        first.close()
        second.close()


def test_08_replays_and_never_reports_lost_events(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    emulator.lose_events(next_subscriptions=1)
    sub = Sub(emulator, [{"type": "pane.created"}])
    try:
        got = sub.lines(timeout=1.0)
    finally:
        sub.close()
    assert [m.get("event") for m in got] == ["pane_created"]  # replayed, no error
    assert emulator.events_lost_sent == 0


@pytest.mark.parametrize("protocol", [20, 22])
def test_completion_seq_marks_a_working_to_idle_transition(make_emulator, protocol):
    emu = make_emulator(protocol=protocol)
    pane = emu.add_agent("claude", "working")

    def agent():
        return ok(emu, "agent.get", {"target": pane})["agent"]

    assert "completion_seq" not in agent()
    emu.set_agent_status(pane, "idle")
    got = agent()
    if protocol == 22:
        assert got["completion_seq"] == got["state_change_seq"]
    else:
        assert "completion_seq" not in got
    emu.set_agent_status(pane, "working")  # cleared on every other change
    assert "completion_seq" not in agent()
    assert emu.violations == []
