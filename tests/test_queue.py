"""FIFO promotion under the global and per-provider caps, with real processes."""

from __future__ import annotations

import subprocess
import sys
import time

from orcr_core.kit.testing import until

ADMITTER = r"""
import os, sys
from orcr_core.sdk.client import Client
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


def test_global_cap_binds_across_providers(short_tmp):
    """Three slots for the machine, two per provider: after p0, q0, p1 the global
    cap is full though testq has room, so q1 waits; each freed slot goes to the
    oldest row whose provider has room (the recount under the write lock)."""
    from orcr_core.agents import lifecycle, queue
    from orcr_core.config import DEFAULTS, Config, _merge
    from orcr_core.store import db as store_db
    from orcr_core.store.models import Agent

    store_db.open_store(short_tmp / "store.db")
    try:
        config = Config(
            _merge(DEFAULTS, {"concurrency": {"max": 3, "testp": 2, "testq": 2}}),
            short_tmp / "config.toml",
        )
        providers = {"testp": object(), "testq": object()}
        rows = {}
        for i in range(3):
            for prov in ("testp", "testq"):
                spec = queue.RunSpec(provider=prov, cwd="/", prompt="x", path=f"{prov}/{i}")
                rows[f"{prov}/{i}"] = queue.admit(spec, providers, short_tmp)["uuid"]

        def promoted():
            return [a.path for a in queue.promote(config)]

        def end(path):
            agent = Agent.get(Agent.uuid == rows[path])
            assert lifecycle.transition(agent, "ended", "killed")

        assert promoted() == ["testp/0", "testq/0", "testp/1"]
        assert queue.live_counts() == {"testp": 2, "testq": 1}
        assert promoted() == []  # global cap full; testq/1 has provider room but waits
        end("testp/0")  # global 2/3; testq/1 (testq 1/2) is the oldest with room
        assert promoted() == ["testq/1"]
        assert promoted() == []
        end("testq/0")  # testp/2 is older than testq/2 and testp has room
        assert promoted() == ["testp/2"]
        end("testp/1")
        end("testp/2")  # two free slots, one queued row
        assert promoted() == ["testq/2"]
        assert sum(queue.live_counts().values()) == 2
    finally:
        store_db.close_store()


def test_global_cap_binds_across_providers_live(orcr_home):
    """The same with a server: the global cap (3) is below the sum of the provider
    caps (2 + 2), so only it keeps a fourth agent out; the event log is replayed."""
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 3\ntestp = 2\ntestq = 2\n'
        '[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        for i in range(4):
            for prov in ("testp", "testq"):
                o.run("x", provider=prov, path=f"{prov}/{i}", cwd="/")
        slots = ("starting", "working", "idle")
        for _ in range(8):  # end the agents one at a time as they come up
            agent = until(
                lambda: next((a for a in o.list() if a["status"] in ("working", "idle")), None),
                20,
                "a live agent",
            )
            assert sum(a["status"] in slots for a in o.list()) <= 3
            o.kill(agent["uuid"])
        until(lambda: o.list() == [], 20, "every agent ended")
    order = _replay_check(orcr_home.events(), 3, {"testp": 2, "testq": 2})
    assert len(order) == 8
