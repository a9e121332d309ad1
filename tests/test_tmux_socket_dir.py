"""Issue 20 item 29: a tmux.socket directory that vanished under a running server
is an outage: queued agents wait (held, said in server status), live agents are
not taken for lost, and everything goes on once the directory is back."""

from __future__ import annotations

import shutil
import subprocess

from orcr_core.kit.testing import until


def test_a_vanished_socket_directory_holds_the_queue(orcr_home, short_tmp):
    sockdir = short_tmp / "sockdir"
    sockdir.mkdir()
    sock = sockdir / "t.sock"
    orcr_home.config(
        f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{sock}"\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    tmux_pid = None
    try:
        orcr_home.run("agent", "run", "-p", "echo", "--path", "s/one", "hi", check=True)
        orcr_home.run("agent", "wait", "s/one", "--timeout", "60s", check=True)
        tmux_pid = subprocess.run(
            ["tmux", "-S", str(sock), "display-message", "-p", "#{pid}"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        shutil.rmtree(sockdir)
        orcr_home.run("agent", "run", "-p", "echo", "--path", "s/two", "again", check=True)
        st = until(
            lambda: (lambda s: s if s["held"] else None)(orcr_home.status()),
            30,
            what="the queue to be held",
        )
        assert "does not exist" in st["held"] and str(sockdir) in st["held"], st["held"]
        assert st["driver"]["healthy"] is False
        assert orcr_home.get("s/two")["status"] == "queued"
        text = orcr_home.run("server", "status", check=True).stdout
        assert "held:" in text and "does not exist" in text
        assert orcr_home.get("s/one")["status"] == "idle"  # not lost, not failed
        sockdir.mkdir()
        orcr_home.run("agent", "wait", "s/two", "--timeout", "60s", check=True)
        assert orcr_home.run("agent", "read", "s/two", check=True).stdout == "again\n"
        assert orcr_home.get("s/one")["status"] == "idle"
        assert orcr_home.status()["drift"]["lost"] == 0
    finally:
        orcr_home.stop_server()
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        if tmux_pid and tmux_pid.isdigit():
            subprocess.run(["kill", tmux_pid], capture_output=True)
