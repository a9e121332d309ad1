"""wait and watch ride out a server restart (SIGKILL): nothing missed, nothing doubled."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import psutil

from orcr_core.kit.testing import until
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client, ServerError
from orcr_core.sdk.watch import RESNAPSHOT, Watcher

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402


def _client_connections(home) -> int:
    """Connections the server accepted (Linux names them by the socket's path too)."""
    conns = psutil.Process(home.proc.pid).net_connections(kind="unix")
    return sum(1 for c in conns if c.laddr == str(home.socket)) - 1  # less the listener


def test_cli_wait_survives_a_server_sigkill(orcr_home):
    orcr_home.start_server()
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "w/a", "hi", check=True)
    with orcr_home.sdk() as o:
        agent = until(lambda: (a := o.get("w/a"))["status"] == "working" and a)
    # The server closes the SDK's and the CLI's connections when it reads their EOF,
    # which under load can come after this line: counted then, they hid the wait's own
    # connection (one closed, one opened: never more than before) and "wait connected"
    # timed out. Wait for them to be gone first.
    until(lambda: _client_connections(orcr_home) == 0, what="earlier clients gone")
    before = 0
    wait = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", "agent", "wait", "w/a", "--timeout", "60s"],
        env=orcr_home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: _client_connections(orcr_home) > before, what="wait connected")
        orcr_home.kill_server()
        # the waiting CLI reconnects, autostarting a server as any verb does
        until(lambda: orcr_home.socket.exists(), what="a restarted server")
        until(lambda: orcr_home.run("agent", "get", "w/a").returncode == 0)
        panes = td.read_state()["panes"]
        assert agent["pane_id"] in panes, (
            [(e["kind"], e["data"]) for e in orcr_home.events()][-12:],
            (orcr_home.path / "run" / "server.log").read_text()[-3000:],
        )
        td.set_status(agent["pane_id"], "idle")
        out, err = wait.communicate(timeout=60)
        assert wait.returncode == 0, err
        assert "idle" in out
    finally:
        wait.kill()
        orcr_home.run("server", "stop")


def test_watch_resumes_across_a_sigkill_under_churn(orcr_home):
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmax = 3\n')
    orcr_home.start_server()
    stop = threading.Event()

    def churn(k):
        i = 0
        while not stop.is_set():
            try:
                with Orcr(Client(orcr_home.socket, autostart=False)) as o:
                    while not stop.is_set():
                        r = o.run("x", provider="testp", path=f"c{k}/a{i}", cwd="/")
                        i += 1
                        if i % 2:
                            o.kill(r["uuid"])
            except (ServerError, OSError):
                stop.wait(0.05)  # the server is down: try again

    threads = [threading.Thread(target=churn, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    w = Watcher(orcr_home.socket, autostart=False, reconnect_for=60)
    state = {a["uuid"]: a["status"] for a in w.snapshot["agents"]}
    seqs: list[int] = []

    def apply(ev):
        seqs.append(ev["seq"])
        if ev["kind"] == "agent.queued":
            state[ev["agent"]] = "queued"
        elif ev["kind"] == "agent.status":
            assert state.get(ev["agent"]) == ev["data"]["from"], ev  # nothing skipped
            state[ev["agent"]] = ev["data"]["to"]

    try:
        while len(seqs) < 100:
            apply(w.next(30))
        orcr_home.kill_server()
        orcr_home.start_server()  # recovery writes its own events too
        mark = len(seqs)
        while len(seqs) < mark + 100:
            ev = w.next(30)
            assert ev is not None and ev["kind"] != RESNAPSHOT
            apply(ev)
    finally:
        stop.set()
        for t in threads:
            t.join()
    with orcr_home.sdk() as o:
        last = o.status()["last_seq"]
        while seqs[-1] < last:
            apply(w.next(30))
        rows = {a["uuid"]: a["status"] for a in o.list(all=True)}
    w.close()
    assert seqs == list(range(w.snapshot["snapshot_seq"] + 1, last + 1))  # contiguous
    assert state == rows


def test_watch_resnapshots_when_its_cursor_expired_during_the_outage(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[events]\nretention = 5\nresume_grace = "0s"\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    w = Watcher(orcr_home.socket, autostart=False)
    cursor = w.cursor
    orcr_home.kill_server()  # the pin dies with the server
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        for i in range(12):
            o.run("x", provider="testp", path=f"e/a{i}", cwd="/")
        until(lambda: orcr_home.events()[0]["seq"] > cursor + 1, what="retention past the cursor")
        ev = w.next(30)
        assert ev["kind"] == RESNAPSHOT
        fresh = {a["uuid"] for a in ev["data"]["agents"]}
        assert fresh == {a["uuid"] for a in o.list()}  # the snapshot replaces the old view
    w.close()
