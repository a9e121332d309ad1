"""``orcr events``: the event log listed with filters, and followed across a server SIGKILL,
a stopped server and a cursor that fell behind retention."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from orcr_core.kit.testing import until


def _seqs(out: str) -> list[int]:
    return [json.loads(ln)["seq"] for ln in out.splitlines() if ln.strip()]


def _events_json(home, *args) -> list[dict]:
    r = home.run("events", "--json", *args)
    assert r.returncode == 0, r.stderr
    return [json.loads(ln) for ln in r.stdout.splitlines()]


def test_events_lists_with_prefix_kind_and_since_filters(orcr_home):
    """Planted: PREFIX ignored (every path kept) -> fails."""
    orcr_home.start_server()
    for p in ("rev/a", "rev/b", "other/c"):
        orcr_home.run("agent", "run", "--provider", "testp", "--path", p, "hi", check=True)
    orcr_home.run("agent", "kill", "rev/b", check=True)
    with orcr_home.sdk() as o:
        until(lambda: o.get("rev/b")["status"] == "ended", what="rev/b ended")
    try:
        # The other agents keep writing events (turn ends, panes) while this runs: every
        # listing is read after the store and cut at the store's last seq, so each compares
        # the same stretch of the log (a listing racing ahead of the store was a flake).
        store = orcr_home.events()
        cut = store[-1]["seq"]

        def upto(events: list[dict]) -> list[dict]:
            return [e for e in events if e["seq"] <= cut]

        everything = upto(_events_json(orcr_home))
        assert [e["seq"] for e in everything] == [e["seq"] for e in store]
        assert [e["kind"] for e in everything] == [e["kind"] for e in store]

        under_rev = upto(_events_json(orcr_home, "rev"))
        want = [e["seq"] for e in store if str(e["data"].get("path", "")).startswith("rev/")]
        assert [e["seq"] for e in under_rev] == want and want
        assert upto(_events_json(orcr_home, "rev/")) == under_rev  # a trailing / changes nothing

        queued = _events_json(orcr_home, "--kind", "agent.queued")
        assert [e["data"]["path"] for e in queued] == ["rev/a", "rev/b", "other/c"]
        family = _events_json(orcr_home, "--kind", "pane", "--kind", "agent.queued")
        assert family and all(
            e["kind"].startswith("pane.") or e["kind"] == "agent.queued" for e in family
        )
        assert {e["kind"] for e in family} > {"agent.queued"}

        mid = store[len(store) // 2]["seq"]
        since_mid = _seqs(orcr_home.run("events", "--json", "--since", str(mid)).stdout)
        assert [s for s in since_mid if s <= cut] == [e["seq"] for e in store if e["seq"] > mid]
        assert [e["seq"] for e in upto(_events_json(orcr_home, "--since", "1h"))] == [
            e["seq"] for e in store
        ]

        text = orcr_home.run("events", "other", "--kind", "agent.queued")
        assert text.returncode == 0, text.stderr
        (line,) = text.stdout.splitlines()
        assert "other/c" in line and "agent.queued" in line and "provider=testp" in line

        bad = orcr_home.run("events", "--since", "yesterday")
        assert bad.returncode == 2 and "neither an event seq nor a duration" in bad.stderr
    finally:
        orcr_home.run("server", "stop")


def _follow(orcr_home) -> tuple[subprocess.Popen, list[str], list[str]]:
    """``orcr events --follow --json --since 0`` as a real process; its stdout and
    stderr lines, collected as they come."""
    follow = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", "events", "--follow", "--json", "--since", "0"],
        env=orcr_home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    errs: list[str] = []
    threading.Thread(target=lambda: lines.extend(follow.stdout), daemon=True).start()
    threading.Thread(target=lambda: errs.extend(follow.stderr), daemon=True).start()
    return follow, lines, errs


def _stop_follower_across_a_restart(orcr_home, follow, lines: list[str], path: str) -> int:
    """Start ``path``, wait until the follower printed the newest event, SIGSTOP it,
    SIGKILL the server and start a new one; the store's newest seq once it stopped.

    That bounds what the follower printed from above: its last lines may still be in
    the pipe, unread by ``lines``' reader thread (the agent writes on after ``last``:
    a CI failure took ``lines[-1]`` for the follower's cursor while two more were on
    their way)."""
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path=path, cwd="/")
        last = orcr_home.events()[-1]["seq"]
        until(lambda: lines and json.loads(lines[-1])["seq"] >= last, what="caught up")
    follow.send_signal(signal.SIGSTOP)
    stopped_at = orcr_home.events()[-1]["seq"]
    orcr_home.kill_server()
    orcr_home.start_server()
    return stopped_at


def test_events_follow_prints_each_event_once_across_a_server_sigkill(orcr_home):
    """Planted: resubscribing from 0 (or from the log's end) instead of the last
    seq printed, without the seq <= cursor drop -> duplicate (missing) seqs -> fails."""
    orcr_home.start_server()
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "f/a", "hi", check=True)
    follow, lines, errs = _follow(orcr_home)
    try:
        last = orcr_home.events()[-1]["seq"]
        until(lambda: lines and json.loads(lines[-1])["seq"] >= last, what="follower caught up")
        # the follower is stopped while the server dies and a new one (autostarted by
        # the next verb) writes events: it must resume from its own last seq
        follow.send_signal(signal.SIGSTOP)
        orcr_home.kill_server()
        orcr_home.run("agent", "run", "--provider", "testp", "--path", "f/b", "hi", check=True)
        orcr_home.run("agent", "kill", "f/a", check=True)
        with orcr_home.sdk() as o:
            until(lambda: o.get("f/a")["status"] == "ended", what="f/a ended")
        follow.send_signal(signal.SIGCONT)
        store = [e["seq"] for e in orcr_home.events()]
        until(
            lambda: lines and json.loads(lines[-1])["seq"] >= store[-1],
            timeout=60,
            what=f"follower printed up to {store[-1]}",
        )
        printed = [json.loads(ln)["seq"] for ln in list(lines)]
        # the agents write on (f/b's start): compare with the log up to the last printed
        store = [s for s in (e["seq"] for e in orcr_home.events()) if s <= printed[-1]]
        assert printed == store, (printed, store)  # each once, in order, none missing
    finally:
        follow.terminate()
        follow.wait(10)
        orcr_home.run("server", "stop")


def test_events_follow_waits_through_a_stopped_server_on_resubscribe(orcr_home):
    """Issue 38 part 6: `--follow` keeps its own bound (EventTail.reconnect_for, 60 s)
    when its resubscribe meets a server that accepts and does not answer its hello
    (SIGSTOPped ~7 s): it goes on once the server resumes, printing each event once.
    Planted: EventTail.subscribe's outage() retrying only GONE, not
    server_not_answering -> the follow exits [server_not_answering] at 5 s -> fails."""
    orcr_home.start_server()
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "s/a", "hi", check=True)
    follow, lines, errs = _follow(orcr_home)
    timer = None
    try:
        last = orcr_home.events()[-1]["seq"]
        until(lambda: lines and json.loads(lines[-1])["seq"] >= last, what="follower caught up")
        # its connection drops (server SIGKILLed); the new server is stopped when the
        # follower, resumed, reconnects: the hello is accepted and never answered
        follow.send_signal(signal.SIGSTOP)
        orcr_home.kill_server()
        pid = orcr_home.start_server().pid
        os.kill(pid, signal.SIGSTOP)
        timer = threading.Timer(7, os.kill, (pid, signal.SIGCONT))
        timer.start()
        t0 = time.monotonic()
        follow.send_signal(signal.SIGCONT)
        timer.join()
        assert time.monotonic() - t0 > 6.5
        assert follow.poll() is None, errs  # still following
        orcr_home.run("agent", "run", "--provider", "testp", "--path", "s/b", "hi", check=True)
        queued_b = next(e["seq"] for e in orcr_home.events() if e["data"].get("path") == "s/b")
        until(
            lambda: lines and json.loads(lines[-1])["seq"] >= queued_b,
            timeout=60,
            what=f"follower printed up to {queued_b}",
        )
        printed = [json.loads(ln)["seq"] for ln in list(lines)]
        store = [s for s in (e["seq"] for e in orcr_home.events()) if s <= printed[-1]]
        assert printed == store, (printed, store)  # each once, in order, none missing
    finally:
        if timer is not None:
            timer.cancel()
        if orcr_home.proc is not None and orcr_home.proc.poll() is None:
            os.kill(orcr_home.proc.pid, signal.SIGCONT)
        follow.send_signal(signal.SIGCONT)
        follow.terminate()
        follow.wait(10)
        orcr_home.run("server", "stop")


def test_events_follow_reports_what_retention_deleted_before_it_read_it(orcr_home):
    """Issue 38 part 3, the cursor-expiry path: a follower away (SIGSTOPped across a
    server restart) longer than ``events.resume_grace`` (0 s here) while more than
    ``events.retention`` rows are written resumes at
    the oldest row kept (``events.subscribe`` ``clamp``), says on stderr which seqs
    retention deleted, and prints every later event once. Planted: EventTail.subscribe
    not calling on_gap -> no gap line -> fails; events.subscribe ignoring clamp ->
    the follow exits cursor_expired at once (its --since 0 is past retention) -> fails."""
    orcr_home.config(
        '[driver]\nname = "test"\n[events]\nretention = 5\nresume_grace = "0s"\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    follow, lines, errs = _follow(orcr_home)
    try:
        stopped_at = _stop_follower_across_a_restart(orcr_home, follow, lines, "g/first")
        with orcr_home.sdk() as o:
            for i in range(12):
                o.run("x", provider="testp", path=f"g/a{i}", cwd="/")
            # past the follower's cursor, wherever it stopped
            until(lambda: orcr_home.events()[0]["seq"] > stopped_at + 1, what="retention past it")
        follow.send_signal(signal.SIGCONT)
        end = orcr_home.events()[-1]["seq"]
        until(lambda: json.loads(lines[-1])["seq"] >= end, timeout=60, what=f"printed {end}")
        until(lambda: errs, what="the gap reported")
        assert follow.poll() is None, errs  # still following
        gaps = []
        for ln in errs:
            m = re.fullmatch(
                r"events (\d+)\.\.(\d+) were deleted by retention before they were read\n", ln
            )
            assert m, errs
            gaps.append((int(m[1]), int(m[2])))
        printed = [json.loads(ln)["seq"] for ln in list(lines)]
        # (a gap at the start too: --since 0 asked for rows retention had already deleted)
        # the resume's gap starts right after the follower's cursor: the last seq it
        # printed before it was stopped
        resumed = [a for a, _ in gaps if 1 < a <= stopped_at + 1]
        assert resumed and resumed[0] - 1 in printed, (stopped_at, gaps, printed)
        # each printed once, in order; every seq not printed is inside a reported gap
        assert printed == sorted(set(printed))
        lost = {s for a, b in gaps for s in range(a, b + 1)}
        assert set(range(1, printed[-1] + 1)) - set(printed) == lost, (printed, gaps)
        kept = [s for s in (e["seq"] for e in orcr_home.events()) if s <= printed[-1]]
        assert set(kept) <= set(printed)  # nothing the store still holds was skipped
    finally:
        follow.send_signal(signal.SIGCONT)
        follow.terminate()
        follow.wait(10)
        orcr_home.run("server", "stop")


def test_events_follow_resubscribed_within_the_grace_loses_nothing(orcr_home):
    """Issue 38 part 3, a restart with a follower behind: SIGSTOPped across a server
    SIGKILL while the new server writes more than ``events.retention`` rows, then resumed
    within ``events.resume_grace`` (default 30 s). The new server deleted nothing
    before the follower resubscribed and pinned its cursor, so it prints every seq
    once, in order, with no gap line. Planted: no start pin in Server.serve -> retention
    deletes past the follower's cursor while it is away -> a gap line -> fails."""
    orcr_home.config(
        '[driver]\nname = "test"\n[events]\nretention = 5\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    follow, lines, errs = _follow(orcr_home)
    try:
        _stop_follower_across_a_restart(orcr_home, follow, lines, "p/first")
        with orcr_home.sdk() as o:
            for i in range(6):  # 6 agent.queued rows at least: more than retention keeps
                o.run("x", provider="testp", path=f"p/a{i}", cwd="/")
            # two more monitor steps: each ends with a retention pass over the writes so far
            seen = o.status()["monitor"]["snapshots"]
            until(lambda: o.status()["monitor"]["snapshots"] >= seen + 2, what="a retention pass")
        follow.send_signal(signal.SIGCONT)
        end = orcr_home.events()[-1]["seq"]
        until(lambda: json.loads(lines[-1])["seq"] >= end, what=f"printed {end}")
        assert follow.poll() is None and errs == [], errs  # following, no gap
        printed = [json.loads(ln)["seq"] for ln in list(lines)]
        assert printed == [e["seq"] for e in orcr_home.events() if e["seq"] <= printed[-1]]
        assert printed == list(range(1, printed[-1] + 1))  # every seq, once, in order
    finally:
        follow.send_signal(signal.SIGCONT)
        follow.terminate()
        follow.wait(10)
        orcr_home.run("server", "stop")


def test_event_tail_resubscribes_clamped_after_a_cursor_expired_frame(short_tmp):
    """The mid-stream expiry: the server's ``_stream`` ends a subscription that fell
    behind retention with a ``cursor_expired`` error frame (a race with retention the
    real server cannot be made to lose on cue, so a peer scripted from
    docs/socket-api.md plays it). EventTail resubscribes clamped, reports the gap and
    hands out each later event once. Planted: the frame raised instead of resubscribing
    (no cursor_expired branch in EventTail.next) -> ServerError -> fails."""
    from orcr_core.protocol import encode
    from orcr_core.sdk.watch import EventTail

    path = short_tmp / "peer.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(4)
    srv.settimeout(10)
    subscribed: list[dict] = []

    def ev(seq: int) -> dict:
        return {"seq": seq, "ts": 0.0, "kind": "agent.status", "agent": None, "data": {}}

    def session(frames_after: list[dict], since_reply: int) -> None:
        conn, _ = srv.accept()
        rd = conn.makefile("rb")
        hello = json.loads(rd.readline())
        conn.sendall(encode({"id": hello["id"], "result": {"protocol": 1}}))
        sub = json.loads(rd.readline())
        subscribed.append(sub["params"])
        rid = sub["id"]
        conn.sendall(encode({"id": rid, "result": {"since_seq": since_reply, "last_seq": 20}}))
        for f in frames_after:
            conn.sendall(encode({"id": rid, **f}))
        if frames_after and "error" in frames_after[-1]:
            conn.close()  # the server returns from _stream after the frame
        else:
            peers.append(conn)

    peers: list[socket.socket] = []
    expired = {
        "error": {"code": "server_error", "message": "cursor expired", "cause": "cursor_expired"}
    }

    def script() -> None:
        session([{"event": ev(4)}, {"event": ev(5)}, expired], 3)
        session([{"event": ev(5)}, {"event": ev(12)}, {"event": ev(13)}], 11)

    t = threading.Thread(target=script, daemon=True)
    t.start()
    gaps: list[tuple[int, int]] = []
    tail = EventTail(
        path, 3, autostart=False, reconnect_for=10, on_gap=lambda a, b: gaps.append((a, b))
    )
    try:
        got = [tail.next(10)["seq"] for _ in range(4)]
        assert got == [4, 5, 12, 13]  # 5 once, though the new stream repeats it
        assert gaps == [(6, 12)]  # events 6..11 named as deleted
        assert [p["since_seq"] for p in subscribed] == [3, 5]  # resumed from its last seq
        assert all(p["clamp"] is True for p in subscribed)
    finally:
        tail.close()
        t.join(5)
        for c in peers:
            c.close()
        srv.close()
