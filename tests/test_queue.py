"""FIFO promotion under the global and per-provider caps, with real processes."""

from __future__ import annotations

import subprocess
import sys
import time

ADMITTER = r"""
import os, sys
from orcr_core.client import Client
from orcr_core.sdk import Orcr
i, n = int(sys.argv[1]), int(sys.argv[2])
with Orcr(Client(autostart=False)) as o:
    for k in range(n):
        prov = "testp" if (i + k) % 3 else "testq"
        r = o.run("go", provider=prov, path=f"w{i}/a{k}", cwd="/")
        print(r["uuid"], flush=True)
"""


def _replay_check(evs: list[dict], cap_max: int, caps: dict) -> list[str]:
    """Replay the event log: caps never exceeded, every promotion the oldest eligible row."""
    queued: dict[str, tuple[int, str]] = {}  # uuid -> (queue_seq, provider)
    live: dict[str, str] = {}
    order = []
    for ev in evs:
        d = ev["data"]
        if ev["kind"] == "agent.queued":
            queued[ev["agent"]] = (d["queue_seq"], d["provider"])
        elif ev["kind"] == "agent.status":
            if d["to"] == "starting":
                seq, prov = queued.pop(ev["agent"])
                counts = {}
                for p in live.values():
                    counts[p] = counts.get(p, 0) + 1
                assert len(live) < cap_max, f"global cap exceeded at seq {ev['seq']}"
                assert counts.get(prov, 0) < caps.get(prov, 10**9), f"{prov} cap exceeded"
                eligible = [s for s, p in queued.values() if counts.get(p, 0) < caps.get(p, 10**9)]
                assert all(s > seq for s in eligible), (
                    f"row {seq} promoted while older eligible rows {sorted(eligible)[:3]} waited"
                )
                live[ev["agent"]] = prov
                order.append(ev["agent"])
            elif d["to"] in ("ended", "lost"):  # lost holds no slot (DESIGN.md §4)
                live.pop(ev["agent"], None)
                queued.pop(ev["agent"], None)
    return order


def test_fifo_and_caps_under_200_concurrent_admissions(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 5\ntestp = 3\ntestq = 1\n'
        '[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ADMITTER, str(i), "50"],
            env=orcr_home.env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    uuids = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        uuids += out.split()
    assert len(set(uuids)) == 200
    with orcr_home.sdk() as o:
        # drain: end every live agent until all 200 have been promoted and ended
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            rows = o.list()
            if not rows:
                break
            live = [a for a in rows if a["status"] in ("working", "idle")]
            assert len([a for a in rows if a["status"] in ("starting", "working", "idle")]) <= 5
            for a in live:
                o.kill(a["uuid"])
            time.sleep(0.02)
        assert o.list() == []
        ended = o.list(all=True)
    assert len(ended) == 200 and all(a["exit_reason"] == "killed" for a in ended)
    order = _replay_check(orcr_home.events(), 5, {"testp": 3, "testq": 1})
    assert sorted(order) == sorted(uuids)  # every agent promoted exactly once


def test_replay_check_catches_a_cap_violation():
    """The checker above bites: a log with a promotion past the cap fails it."""
    import pytest

    evs = [
        {"seq": 1, "kind": "agent.queued", "agent": "a", "data": {"queue_seq": 1, "provider": "p"}},
        {"seq": 2, "kind": "agent.queued", "agent": "b", "data": {"queue_seq": 2, "provider": "p"}},
        {"seq": 3, "kind": "agent.status", "agent": "a", "data": {"to": "starting"}},
        {"seq": 4, "kind": "agent.status", "agent": "b", "data": {"to": "starting"}},
    ]
    with pytest.raises(AssertionError, match="cap exceeded"):
        _replay_check(evs, 5, {"p": 1})
    evs[2], evs[3] = (
        {"seq": 3, "kind": "agent.status", "agent": "b", "data": {"to": "starting"}},
        {"seq": 4, "kind": "agent.status", "agent": "a", "data": {"to": "starting"}},
    )
    with pytest.raises(AssertionError, match="older eligible"):
        _replay_check(evs, 5, {"p": 1})


def test_full_provider_does_not_block_another(orcr_home):
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmax = 4\ntestq = 1\n')
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        o.run("x", provider="testq", path="q/one", cwd="/")
        o.run("x", provider="testq", path="q/two", cwd="/")
        o.run("x", provider="testp", path="p/one", cwd="/")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            st = {a["path"]: a["status"] for a in o.list()}
            if st["p/one"] == "working" and st["q/one"] == "working":
                break
            time.sleep(0.05)
        assert st == {"q/one": "working", "q/two": "queued", "p/one": "working"}
        o.kill("q/one")
        deadline = time.monotonic() + 10
        while o.get("q/two")["status"] == "queued" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert o.get("q/two")["status"] in ("starting", "working")


def test_cap_raised_by_config_set_promotes_waiting_rows(orcr_home):
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmax = 1\n')
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="c/one", cwd="/")
        o.run("x", provider="testp", path="c/two", cwd="/")
        time.sleep(0.5)
        assert o.get("c/two")["status"] == "queued"
        orcr_home.run("config", "set", "concurrency.max", "2", check=True)
        deadline = time.monotonic() + 10
        while o.get("c/two")["status"] == "queued" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert o.get("c/two")["status"] != "queued"
