"""The socket protocol: negotiation, framing limits, errors, permissions."""

from __future__ import annotations

import json
import os
import socket
import stat

from orcr_core.protocol import MAX_FRAME, PROTOCOL_VERSION


def _conn(home):
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(home.socket))
    s.settimeout(10)
    return s, s.makefile("rb")


def _req(s, f, obj):
    s.sendall(json.dumps(obj).encode() + b"\n")
    return json.loads(f.readline())


def _hello(s, f):
    return _req(s, f, {"id": 1, "method": "hello", "params": {"protocol": PROTOCOL_VERSION}})


def test_version_mismatch_is_refused(server):
    s, f = _conn(server)
    r = _req(s, f, {"id": 1, "method": "hello", "params": {"protocol": 99}})
    assert r["error"]["code"] == "unsupported_version"
    assert "99" in r["error"]["message"]
    assert f.readline() == b""  # connection closed


def test_first_request_must_be_hello(server):
    s, f = _conn(server)
    r = _req(s, f, {"id": 7, "method": "agent.list", "params": {}})
    assert r == {"id": 7, "error": {"code": "hello_required", "message": r["error"]["message"]}}


def test_unknown_fields_ignored_unknown_method_named(server):
    s, f = _conn(server)
    r = _req(s, f, {"id": 1, "method": "hello", "params": {"protocol": 1, "future": True}, "x": 1})
    assert r["result"]["protocol"] == 1
    r = _req(s, f, {"id": 2, "method": "agent.fly", "params": {}})
    assert r["error"]["code"] == "unknown_method"
    r = _req(s, f, {"id": 3, "method": "agent.list", "params": {"prefix": None, "colour": "red"}})
    assert r["result"] == {"agents": []}


def test_corrupt_frame_answers_and_keeps_the_connection(server):
    s, f = _conn(server)
    _hello(s, f)
    s.sendall(b'{"id": 2, "method": \xff nope\n')
    r = json.loads(f.readline())
    assert r["error"]["code"] == "invalid_json"
    assert _req(s, f, {"id": 3, "method": "agent.list", "params": {}})["result"] == {"agents": []}


def test_oversized_frame_is_refused_and_others_are_served(server):
    big, fb = _conn(server)
    _hello(big, fb)
    other, fo = _conn(server)
    _hello(other, fo)
    chunk = b"x" * (1024 * 1024)
    try:
        for _ in range(MAX_FRAME // len(chunk) + 2):
            big.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    line = fb.readline()
    assert json.loads(line)["error"]["code"] == "frame_too_large"
    assert _req(other, fo, {"id": 5, "method": "agent.list", "params": {}})["result"] == {
        "agents": []
    }
    s, f = _conn(server)  # and new connections too
    assert _hello(s, f)["result"]["protocol"] == 1


def test_bad_param_types_are_named(server):
    s, f = _conn(server)
    _hello(s, f)
    r = _req(s, f, {"id": 2, "method": "agent.run", "params": {"provider": 3, "cwd": "/"}})
    assert r["error"] == {"code": "invalid_params", "message": "parameter 'provider' must be str"}


def test_socket_is_private(server):
    assert stat.S_IMODE(server.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(server.socket.parent.stat().st_mode) == 0o700


def test_second_server_on_same_store_refuses(server):
    assert "already runs" in server.run_second_server().stderr
    assert server.proc.poll() is None
    s, f = _conn(server)
    assert _hello(s, f)["result"]["pid"] == server.proc.pid


def test_autostart_from_cli_and_stop(orcr_home):
    r = orcr_home.run("agent", "ls", "--json", check=True)
    assert r.stdout.strip() == "[]"
    st = orcr_home.status()
    assert st["protocol"] == PROTOCOL_VERSION and st["schema_version"] >= 1
    assert orcr_home.run("server", "stop", check=True).stdout.startswith("orcr server")
    assert not orcr_home.socket.exists()
    r = orcr_home.run("server", "status")
    assert r.returncode == 6 and "orcr server start" in r.stderr


def test_other_users_are_refused_even_past_file_modes(server):
    """Defence in depth: with the modes opened up, another uid still gets `forbidden`."""
    import subprocess
    import sys

    opened = [server.path.parent, server.path]  # the tmp dirs above run/ too
    for d in opened:
        os.chmod(d, 0o711)
    os.chmod(server.socket.parent, 0o777)
    os.chmod(server.socket, 0o666)
    probe = (
        "import json, os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        # the server answers `forbidden` on accept and closes: the hello may meet a
        # closed socket, the reply is still there to read
        "try:\n"
        '    s.sendall(b\'{"id":1,"method":"hello","params":{"protocol":1}}\\n\')\n'
        "except BrokenPipeError:\n"
        "    pass\n"
        "print(s.makefile().readline())\n"
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", probe, str(server.socket)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.chmod(server.socket.parent, 0o700)
        os.chmod(server.socket, 0o600)
        for d in opened:
            os.chmod(d, 0o700)
    assert json.loads(r.stdout)["error"]["code"] == "forbidden", r.stderr


def test_a_client_not_connected_says_so_rather_than_failing_on_none():
    """Planted: send() on self.sock unchecked -> AttributeError on None, fails."""
    import pytest

    from orcr_core.sdk.client import Client, ServerError

    with pytest.raises(ServerError, match="not connected; call connect()") as err:
        Client("/nonexistent/orcr.sock", autostart=False).send("agent.list")
    assert err.value.code == "not_connected"
