"""The emulator's transport and request parsing behave like herdr's socket server."""

from __future__ import annotations

import json
import socket

import pytest
from orcr_testing.herdr.ids import decode_number, encode_number
from orcr_testing.herdr.transport import MAX_REQUEST_BYTES
from orcr_testing.herdr.wire import call, ok, raw


@pytest.mark.parametrize("protocol", [19, 20])
def test_ping_reports_configured_protocol(make_emulator, protocol):
    emu = make_emulator(protocol=protocol)
    pong = ok(emu, "ping")
    assert (pong["type"], pong["version"], pong["protocol"]) == ("pong", "0.8.0", protocol)
    assert emu.violations == []


def test_one_request_per_connection(emulator):
    two = b'{"id":"a","method":"ping","params":{}}\n{"id":"b","method":"ping","params":{}}\n'
    lines = raw(emulator.socket_path, two).splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["id"] == "a"


def test_parse_failures_answer_invalid_request_with_empty_id(emulator):
    bad = [
        b"{not json\n",
        b'{"id":"x","method":"no.such","params":{}}\n',
        b'{"id":7,"method":"ping","params":{}}\n',
        b'{"id":"x","method":"pane.get","params":{}}\n',  # missing required pane_id
    ]
    for line in bad:
        reply = json.loads(raw(emulator.socket_path, line))
        assert reply["id"] == "" and reply["error"]["code"] == "invalid_request", line
    assert {v.kind for v in emulator.violations} == {"request"}  # the bad ones were recorded
    assert len(emulator.violations) == 3  # unparsable JSON is not a request at all
    emulator.violations.clear()


def test_unknown_fields_are_ignored(emulator):
    line = {"id": "u", "method": "ping", "params": {"extra": 1}, "also": True}
    reply = json.loads(raw(emulator.socket_path, json.dumps(line) + "\n"))
    assert reply["result"]["type"] == "pong" and reply["id"] == "u"


def test_oversized_and_blank_requests_are_dropped_without_answer(emulator):
    big = b'{"id":"big","method":"ping","params":{"pad":"' + b"x" * MAX_REQUEST_BYTES + b'"}}\n'
    assert raw(emulator.socket_path, big) == b""
    assert raw(emulator.socket_path, b"\n") == b""
    assert raw(emulator.socket_path, b"\xff\xfe\n") == b""  # invalid UTF-8
    assert ok(emulator, "ping")["type"] == "pong"  # still serving


def test_slow_request_dropped_after_timeout(make_emulator):
    emu = make_emulator()
    assert emu.request_timeout == 5.0  # herdr's INITIAL_REQUEST_TIMEOUT
    emu.request_timeout = 0.3
    s = socket.socket(socket.AF_UNIX)
    s.connect(emu.socket_path)
    s.sendall(b'{"id":"s","method":"ping"')  # never finishes the line
    s.settimeout(3)
    assert s.recv(100) == b""  # closed without a word
    s.close()


def test_public_numbers_are_bijective_base32():
    assert [encode_number(n) for n in (1, 9, 10, 31, 32, 33, 64, 65)] == [
        "1", "9", "A", "Z", "0", "11", "10", "21",
    ]  # fmt: skip
    assert all(decode_number(encode_number(n)) == n for n in range(1, 3000))


def test_ids_follow_herdr_allocation(emulator):
    created = ok(emulator, "workspace.create", {"label": "proj", "cwd": "/tmp"})
    assert created["workspace"]["workspace_id"] == "w1"
    assert created["tab"]["tab_id"] == "w1:t1" and created["root_pane"]["pane_id"] == "w1:p1"
    for _ in range(9):
        ok(emulator, "tab.create", {"workspace_id": "w1"})
    tabs = ok(emulator, "tab.list", {"workspace_id": "w1"})["tabs"]
    assert tabs[-1]["tab_id"] == "w1:tA" and tabs[-1]["number"] == 10
    ok(emulator, "tab.close", {"tab_id": "w1:tA"})
    assert ok(emulator, "tab.create", {"workspace_id": "w1"})["tab"]["tab_id"] == "w1:tB"
    assert ok(emulator, "workspace.create", {})["workspace"]["workspace_id"] == "w2"


def test_errors_carry_the_request_id_and_a_code(emulator):
    reply = call(emulator, "pane.get", {"pane_id": "w9:p9"}, rid="q1")
    assert reply == {
        "id": "q1",
        "error": {"code": "pane_not_found", "message": "pane w9:p9 not found"},
    }
    reply = call(emulator, "pane.send_keys", {"pane_id": "w9:p9", "keys": ["enter"]})
    assert reply["error"]["code"] == "pane_not_found"
