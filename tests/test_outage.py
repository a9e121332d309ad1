"""A multiplexer outage in the middle of a run never frees a name (seed 002,
issue 8 item 19): while the multiplexer does not answer, no agent becomes lost or
ends, every path stays reserved, and the run carries on once it answers again.

On real tmux the server is SIGSTOPped (it stops answering; its clients block until
orcr's call times out); on the herdr emulator every request is refused unanswered.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from orcr_core.kit.testing import until


def _snapshot_clients(sock: str) -> set[int]:
    """orcr's tmux clients blocked in a ``list-panes`` (a snapshot) on that socket."""
    out = subprocess.run(
        ["pgrep", "-f", "--", f"-S {sock} list-panes"], capture_output=True, text=True
    )
    return {int(p) for p in out.stdout.split()}


@contextlib.contextmanager
def _outage(home):
    """The multiplexer stops answering until the block ends; the block starts once
    orcr's monitor has seen at least one snapshot fail (and is trying again)."""
    mux = home.mux
    if mux.kind == "tmux":
        sock = str(mux.socket)
        pid = int(
            subprocess.run(
                ["tmux", "-S", sock, "display-message", "-p", "#{pid}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout  # fmt: skip
        )
        os.kill(pid, signal.SIGSTOP)
        try:
            first = until(lambda: _snapshot_clients(sock), 15, what="a blocked snapshot")
            # that call timed out (a failed snapshot) and the monitor tried again
            until(lambda: _snapshot_clients(sock) - first, 30, what="a second snapshot attempt")
            yield
        finally:
            os.kill(pid, signal.SIGCONT)
    else:
        emu = mux.emulator
        emu.mute()
        try:
            # the periodic pass tries every second: many failed snapshots, past LOST_CONFIRM
            until(lambda: emu.muted_connections >= 60, 30, what="failed snapshots")
            yield
        finally:
            emu.unmute()


def test_an_outage_mid_run_never_frees_a_name(live):
    # the monitor is event-driven (no snapshot polling while pane events are live):
    # its periodic pass, every second here, is what keeps trying during the outage
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nreconcile_every = "1s"\n')
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "o/idle", "first", check=True)
    live.run("agent", "wait", "o/idle", "--timeout", "30s", check=True)
    live.run("agent", "run", "-p", "echo", "--path", "o/busy", "[sleep 4] done", check=True)
    until(lambda: live.get("o/busy")["status"] == "working", 30, what="o/busy working")

    with _outage(live):
        for path in ("o/idle", "o/busy"):
            # turns still come from transcripts; the pane's fate is not decided
            assert live.get(path)["status"] in ("working", "idle")
            r = live.run("agent", "run", "-p", "echo", "--path", path, "again")
            assert r.returncode != 0 and "path_in_use" in r.stderr, r.stderr

    # the multiplexer answers again: the run carries on where it was
    live.run("agent", "wait", "o/busy", "--timeout", "60s", check=True)
    assert live.run("agent", "read", "o/busy", check=True).stdout == "done\n"
    live.run("agent", "send", "o/idle", "second", check=True)
    live.run("agent", "wait", "o/idle", "--timeout", "60s", check=True)
    assert live.run("agent", "read", "o/idle", check=True).stdout == "second\n"
    for path in ("o/idle", "o/busy"):
        statuses = [
            e["data"]["to"]
            for e in live.events(live.get(path)["uuid"])
            if e["kind"] == "agent.status"
        ]
        assert "lost" not in statuses and "ended" not in statuses, (path, statuses)
    assert live.mux.labels() == ["o/busy", "o/idle"]
