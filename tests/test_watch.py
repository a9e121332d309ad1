"""watch.open under churn, events.subscribe and cursor_expired."""

from __future__ import annotations

import json
import threading
import time

from orcr_core.client import Client, ServerError
from orcr_core.sdk import Orcr


def _db_events(home):
    return [e["seq"] for e in home.events()]


def test_watch_misses_and_duplicates_nothing_under_churn(orcr_home):
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmax = 3\n[events]\nretention = 50\n')
    orcr_home.start_server()
    stop = threading.Event()

    def churn(k):
        with Orcr(Client(orcr_home.socket, autostart=False)) as o:
            i = 0
            while not stop.is_set():
                r = o.run("x", provider="testp", path=f"c{k}/a{i}", cwd="/")
                if i % 2:
                    o.kill(r["uuid"])
                i += 1

    threads = [threading.Thread(target=churn, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    c = Client(orcr_home.socket, autostart=False).connect()
    snap, stream = c.stream("watch.open")
    state = {a["uuid"]: a["status"] for a in snap["agents"]}
    seqs = []
    c.sock.settimeout(5)
    while len(seqs) <= 200:  # real churn, far past the retention of 50
        ev = next(stream)
        seqs.append(ev["seq"])
        if ev["kind"] == "agent.queued":
            state[ev["agent"]] = "queued"
        elif ev["kind"] == "agent.status":
            assert state.get(ev["agent"]) == ev["data"]["from"], ev  # no transition skipped
            state[ev["agent"]] = ev["data"]["to"]
    stop.set()
    for t in threads:
        t.join()
    assert seqs[0] == snap["snapshot_seq"] + 1
    assert seqs == list(
        range(seqs[0], seqs[0] + len(seqs))
    )  # contiguous: nothing missed or doubled
    # the watcher's view equals the store's, row for row
    with Orcr(Client(orcr_home.socket, autostart=False)) as o:
        rows = {a["uuid"]: a["status"] for a in o.list(all=True)}
    # drain what the watcher has not read yet
    c.sock.settimeout(1)
    try:
        while True:
            ev = next(stream)
            if ev["kind"] == "agent.status":
                state[ev["agent"]] = ev["data"]["to"]
            elif ev["kind"] == "agent.queued":
                state[ev["agent"]] = "queued"
    except TimeoutError:
        pass
    with Orcr(Client(orcr_home.socket, autostart=False)) as o:
        rows = {a["uuid"]: a["status"] for a in o.list(all=True)}
    assert state == rows
    c.close()


def test_cursor_expired_for_an_unpinned_subscriber(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[events]\nretention = 5\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        for i in range(10):
            o.run("x", provider="testp", path=f"e/a{i}", cwd="/")
        deadline = time.monotonic() + 10
        while _db_events(orcr_home)[0] <= 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    c = Client(orcr_home.socket, autostart=False).connect()
    try:
        c.call("events.subscribe", since_seq=0)
        raise AssertionError("expected cursor_expired")
    except ServerError as exc:
        assert exc.code == "server_error" and exc.cause == "cursor_expired"
    c.close()
    # a fresh cursor works and streams
    c = Client(orcr_home.socket, autostart=False).connect()
    last = _db_events(orcr_home)[-1]
    first, stream = c.stream("events.subscribe", since_seq=last - 2)
    ev = next(stream)
    assert ev["seq"] == last - 1
    c.close()


def test_wait_through_queue_and_first_turn(orcr_home):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "plugins"))
    import orcr_test_driver as td

    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 1\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        first = o.run("x", provider="testp", path="w/first", cwd="/")
        o.run("x", provider="testp", path="w/second", cwd="/")
        result = {}

        def waiter():
            try:
                result["agent"] = Orcr(Client(orcr_home.socket, autostart=False)).wait(
                    "w/second", timeout=20
                )
            except Exception as exc:
                result["error"] = exc

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)
        assert o.get("w/second")["status"] == "queued"
        for _ in range(100):
            if o.get(first["uuid"])["status"] == "working":
                break
            time.sleep(0.02)
        o.kill(first["uuid"])
        for _ in range(200):
            a = o.get("w/second")
            if a["status"] == "working":
                break
            time.sleep(0.02)
        td.set_status(a["pane_id"], "idle")
        t.join(20)
        assert result.get("agent", {}).get("status") == "idle", result
    r = orcr_home.run("agent", "wait", "w/second", "--until", "ended", "--timeout", "0.3s")
    assert r.returncode == 4 and "still idle" in r.stderr
    orcr_home.run("agent", "kill", "w/second", check=True)
    r = orcr_home.run("agent", "wait", "w/second", "--until", "ended", "--json", check=True)
    assert json.loads(r.stdout)["exit_reason"] == "killed"


def test_wait_shows_progress_on_a_terminal_only(orcr_home):
    import os
    import pty  # noqa: F401  (a real pseudo-terminal for stderr)
    import subprocess
    import sys

    orcr_home.start_server()
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "tty/a", "x", check=True)
    cmd = [sys.executable, "-m", "orcr_core.cli", "agent", "wait", "tty/a", "--timeout", "1.5s"]
    master, slave = os.openpty()
    p = subprocess.Popen(cmd, env=orcr_home.env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    p.wait(30)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    text = out.decode(errors="replace")
    assert "tty/a: working" in text and "s " in text  # status and elapsed seconds
    piped = orcr_home.run("agent", "wait", "tty/a", "--timeout", "0.5s")
    assert "tty/a: working" not in piped.stderr  # nothing extra when piped
    assert piped.returncode == 4
