"""The whole stack against herdr: orcr starts its own herdr server (the emulator
program behind a `herdr` on PATH), captures agent_session reports, attaches."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess

import pytest

from orcr_core import dirs
from orcr_core.kit.testing import until as _until  # noqa: E402


@pytest.mark.parametrize("protocol", [20, 22])
def test_orcr_starts_its_own_herdr_and_runs_an_agent(orcr_home, short_tmp, protocol):
    """On herdr 0.8 and 0.9.3: ``herdr --session NAME server`` (a background server
    per session; 0.9 has no ``--no-session``), an agent run end to end, status."""
    from orcr_testing.herdr.shim import write_herdr_shim

    bindir = short_tmp / "bin"
    write_herdr_shim(
        bindir, env={"ORCR_HERDR_EMU_SHELL": "/bin/sh", "ORCR_HERDR_EMU_PROTOCOL": str(protocol)}
    )
    xdg = short_tmp / "xdg"
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "XDG_CONFIG_HOME": str(xdg)}
    orcr_home.env.update(env)
    orcr_home.config('[driver]\nname = "auto"\n[timings]\npoll_every = "50ms"\n')
    try:
        orcr_home.start_server()
        orcr_home.run(
            "agent", "run", "--provider", "echo", "--path", "h/one", "hi there", check=True
        )
        orcr_home.run("agent", "wait", "h/one", "--timeout", "30s", check=True)
        assert orcr_home.run("agent", "read", "h/one", check=True).stdout == "hi there\n"
        st = orcr_home.status()
        assert (st["driver"]["name"], st["driver"]["error"]) == ("herdr", None)
        info = st["driver"]["info"]
        assert info["protocol"] == protocol
        assert info["version"] == ("0.9.3" if protocol == 22 else "0.8.0")
        assert info["capabilities"]["live_handoff"] is True
        text = orcr_home.run("server", "status", check=True).stdout
        assert (
            f"driver herdr  version {info['version']}  protocol {protocol}  capabilities " in text
        )
        assert ("health_check" in text) == (protocol == 22)
        # the instance's own session (ORCR_HOME is set): orcr-<instance id>
        session = st["driver"]["info"]["session"]
        assert session == dirs.mux_name() == f"orcr-{dirs.instance_id()}"
        sock = xdg / "herdr" / "sessions" / session / "herdr.sock"
        assert sock.exists()  # herdr's own socket path for that session
        owned_cfg = orcr_home.path / "herdr-config.toml"
        assert "resume_agents_on_restore = false" in owned_cfg.read_text()
        r = orcr_home.run("agent", "attach", "h/one", check=True)
        assert "h/one is pane" in r.stdout
        # the herdr server outlives an orcr crash, and the agent with it
        orcr_home.kill_server()
        orcr_home.start_server()
        orcr_home.run("agent", "send", "h/one", "again", check=True)
        orcr_home.run("agent", "wait", "h/one", "--timeout", "30s", check=True)
        assert orcr_home.run("agent", "read", "h/one", check=True).stdout == "again\n"
    finally:
        orcr_home.stop_server()
        out = subprocess.run(
            ["pgrep", "-f", f"orcr_testing.herdr.emulator.*{xdg}|{bindir}/herdr"],
            capture_output=True,
            text=True,
        ).stdout.split()
        pids = [int(p) for p in out]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_agent_session_is_captured_from_herdr_without_an_event(live):
    if live.mux.kind != "herdr":
        assert live.mux.kind == "tmux"  # tmux reports no session: covered by test_e2e on tmux
        return
    live.start_server()
    live.run(
        "agent", "run", "--provider", "command", "--path", "s/cmd", "--", "sleep", "60", check=True
    )
    a = _until(
        lambda: (lambda a: a if a["status"] in ("working", "idle") else None)(live.get("s/cmd")),
        what="started",
    )
    assert a["agent_session"] is None
    live.mux.emulator.set_agent_session(
        a["pane_id"], "thread-123", agent="codex", source="herdr:codex"
    )
    a = _until(
        lambda: (lambda a: a if a["agent_session"] else None)(live.get("s/cmd")),
        what="captured",
    )
    assert a["agent_session"] == {"source": "herdr:codex", "kind": "id", "value": "thread-123"}


def test_gc_clock_survives_a_server_restart(live):
    """The GC clock is the persisted idle_since: an agent idle for 2 h while no
    server ran (the machine slept) is collected at once under gc_after = 1h; a
    clock restarted by the new server would keep it an hour more."""
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\ngc_after = "1h"\n')
    live.start_server()
    live.run("agent", "run", "--provider", "echo", "--path", "gc/x", "hi", check=True)
    live.run("agent", "wait", "gc/x", "--timeout", "30s", check=True)
    live.kill_server()
    conn = sqlite3.connect(live.path / "store.db")
    with conn:
        n = conn.execute(
            "UPDATE agent SET idle_since = idle_since - 7200 WHERE path = 'gc/x'"
        ).rowcount
    conn.close()
    assert n == 1
    live.start_server()
    r = live.run(
        "agent", "wait", "gc/x", "--until", "ended", "--timeout", "30s", "--json", check=True
    )
    assert json.loads(r.stdout)["exit_reason"] == "gc"
