"""watch.open under churn, events.subscribe and cursor_expired."""

from __future__ import annotations

import json
import re
import threading

from orcr_core.kit.testing import until
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client, ServerError


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
    until(lambda: len(_db_events(orcr_home)) > 30, 20, "churn under way")
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
        '[driver]\nname = "test"\n[events]\nretention = 5\nresume_grace = "0s"\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        for i in range(10):
            o.run("x", provider="testp", path=f"e/a{i}", cwd="/")
        until(lambda: _db_events(orcr_home)[0] > 1, 10, "retention to delete the first events")
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
        seen: list[str] = []  # every status the waiter saw, from its snapshot on
        watching = threading.Event()

        def on_change(agent):
            seen.append(agent["status"])
            watching.set()

        def waiter():
            try:
                result["agent"] = Orcr(Client(orcr_home.socket, autostart=False)).wait(
                    "w/second", timeout=20, on_change=on_change
                )
            except Exception as exc:
                result["error"] = exc

        t = threading.Thread(target=waiter)
        t.start()
        assert watching.wait(20), result
        assert seen == ["queued"]  # it waits from the queue
        until(lambda: o.get(first["uuid"])["status"] == "working", 20, "the first agent working")
        o.kill(first["uuid"])
        a = until(
            lambda: (lambda a: a if a["status"] == "working" else None)(o.get("w/second")),
            20,
            "the second agent promoted and working",
        )
        assert seen[-1] != "idle" and t.is_alive()  # no turn has ended yet: still waiting
        td.set_status(a["pane_id"], "idle")
        t.join(20)
        assert result.get("agent", {}).get("status") == "idle", result
        assert seen[0] == "queued" and "working" in seen and seen[-1] == "idle", seen
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
    assert p.wait(30) == 4  # the documented exit code of a wait that timed out
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
    assert re.search(r"tty/a: working +\d+\.\ds", text), text  # status and elapsed seconds
    piped = orcr_home.run("agent", "wait", "tty/a", "--timeout", "0.5s")
    assert "tty/a: working" not in piped.stderr  # nothing extra when piped
    assert piped.returncode == 4


def _floor(home) -> int:
    import sqlite3

    conn = sqlite3.connect(home.path / "store.db")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'events_floor'").fetchone()
    finally:
        conn.close()
    return int(row[0]) if row else 0


def test_a_watcher_far_behind_holds_retention_back(orcr_home):
    """retention = 5, and a watcher that stops reading while ~2000 events (far
    more than its socket holds) are written: its pin keeps every event it has
    not read, so when it reads again its stream is whole; once it is gone,
    retention catches up."""
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 1\n[events]\nretention = 5\nresume_grace = "0s"\n'
        '[timings]\npoll_every = "20ms"\n'
    )
    orcr_home.start_server()
    watcher = Client(orcr_home.socket, autostart=False).connect()
    snap, stream = watcher.stream("watch.open")
    deep = "/".join(["x" * 60, "y" * 60, "z" * 60])  # long paths: big events
    with orcr_home.sdk() as o:
        done = o.run_many(
            [dict(prompt="x", provider="testp", path=f"{deep}/a{i}", cwd="/") for i in range(2000)]
        )
        assert all("uuid" in r for r in done)
        last = _db_events(orcr_home)[-1]
        # retention ran meanwhile (it has deleted up to a floor), yet kept the rest
        until(lambda: _floor(orcr_home) > 0, 60, "a retention pass")
    watcher.sock.settimeout(10)
    seqs, size = [], 0
    while not seqs or seqs[-1] < last:
        ev = next(stream)
        seqs.append(ev["seq"])
        size += len(json.dumps(ev))
    assert seqs == list(range(snap["snapshot_seq"] + 1, last + 1))  # nothing missed
    # the stream really stalled: far more than a socket buffer was waiting
    assert size > 2 * int(open("/proc/sys/net/core/wmem_default").read())
    watcher.close()
    # unpinned, retention deletes down to the newest 5. It runs after a write (events
    # come only with writes) and the server sees the watcher gone when it next sends to
    # it, so each poll admits one more agent: on a slow machine the queue may be quiet.
    n = iter(range(10**6))
    with orcr_home.sdk() as o:

        def caught_up() -> bool:
            o.run(prompt="x", provider="testp", path=f"after/a{next(n)}", cwd="/")
            return len(_db_events(orcr_home)) <= 10

        until(caught_up, 60, "retention after the watcher left")


def test_since_seq_exactly_at_the_retention_floor(orcr_home):
    """Events up to the floor are deleted: since_seq = floor asks for floor + 1
    on, which is kept (accepted); floor - 1 asks for the deleted floor (expired)."""
    orcr_home.config(
        '[driver]\nname = "test"\n[events]\nretention = 5\nresume_grace = "0s"\n[timings]\npoll_every = "20ms"\n'
    )
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        for i in range(4):
            o.run("x", provider="testp", path=f"f/a{i}", cwd="/")
        until(lambda: all(a["status"] == "working" for a in o.list()), 20, "quiet")
    until(lambda: len(_db_events(orcr_home)) == 5, 10, "retention down to 5 events")
    floor = _floor(orcr_home)
    kept = _db_events(orcr_home)
    assert floor > 0 and kept == list(range(floor + 1, floor + 6))
    c = Client(orcr_home.socket, autostart=False).connect()
    c.sock.settimeout(5)
    head, stream = c.stream("events.subscribe", since_seq=floor)
    assert head["since_seq"] == floor
    assert [next(stream)["seq"] for _ in kept] == kept  # the whole kept log, from floor + 1
    c.close()
    c = Client(orcr_home.socket, autostart=False).connect()
    try:
        c.call("events.subscribe", since_seq=floor - 1)
        raise AssertionError("since_seq below the floor must be cursor_expired")
    except ServerError as exc:
        assert exc.code == "server_error" and exc.cause == "cursor_expired"
        assert f"oldest kept: {floor + 1}" in str(exc)
    finally:
        c.close()
