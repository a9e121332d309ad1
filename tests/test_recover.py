"""Restart recovery with the test driver: re-matching by label, outages."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until as _until  # noqa: E402


def test_pane_with_a_new_id_is_rematched_by_label(server):
    with server.sdk() as o:
        o.run("x", provider="testp", path="r/a", cwd="/")
        a = _until(lambda: (lambda a: a if a["status"] == "working" else None)(o.get("r/a")))
    server.kill_server()
    with td._state() as s:  # the multiplexer came back with other pane ids
        s["panes"]["w9:p99"] = s["panes"].pop(a["pane_id"])
    server.start_server()
    with server.sdk() as o:
        b = o.get("r/a")
    assert (b["status"], b["pane_id"]) == ("working", "w9:p99")
    conn = sqlite3.connect(server.path / "store.db")
    kinds = [
        (k, json.loads(d))
        for k, d in conn.execute("SELECT kind, data FROM event WHERE kind='agent.rematched'")
    ]
    assert kinds and kinds[0][1]["repair"] is True


def test_multiplexer_outage_never_frees_a_name(server):
    with server.sdk() as o:
        o.run("x", provider="testp", path="o/a", cwd="/")
        _until(lambda: o.get("o/a")["status"] == "working")
    server.stop_server()
    server.start_server(extra_env={"ORCR_TEST_DRIVER_DOWN": "1"})
    time.sleep(1.0)  # several monitor ticks with the multiplexer unreachable
    with server.sdk() as o:
        assert o.get("o/a")["status"] == "working"
        r = server.run("agent", "run", "--provider", "testp", "--path", "o/a", "x")
        assert "path_in_use" in r.stderr
        assert "test driver down" in o.status()["driver"]["error"]


def test_report_session_needs_the_agents_launch_token(server):
    import os

    with server.sdk() as o:
        a = o.run("x", provider="testp", path="rs/a", cwd="/")
        _until(lambda: o.get("rs/a")["status"] == "working")
        token = json.loads((server.path / "agents" / a["uuid"] / "launch.json").read_text())[
            "launch_token"
        ]
        from orcr_core.sdk.client import ServerError

        try:
            o.client.call(
                "agent.report_session",
                uuid=a["uuid"],
                launch_token="guess",
                source="x",
                kind="id",
                value="t1",
            )
            raise AssertionError("a wrong token was accepted")
        except ServerError as exc:
            assert exc.code == "forbidden"
        assert o.get("rs/a")["agent_session"] is None
    # the agent's own process reports through `orcr internal codex-notify`
    env = {"ORCR_ID": a["uuid"], "ORCR_LAUNCH_TOKEN": token, "ORCR_SOCKET": str(server.socket)}
    r = server.run(
        "internal", "codex-notify", '{"type":"agent-turn-complete","thread-id":"th-9"}', env=env
    )
    assert r.returncode == 0 and r.stderr == ""
    with server.sdk() as o:
        assert o.get("rs/a")["agent_session"] == {
            "source": "orcr:codex-notify",
            "kind": "id",
            "value": "th-9",
        }
    # garbage never makes the notify program fail (it must not disturb Codex)
    assert server.run("internal", "codex-notify", "not json", env=env).returncode == 0
    assert os.environ.get("ORCR_ID") is None
