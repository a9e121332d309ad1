"""orcr top with 500 agents under steady churn, headless: how long an update batch
takes to reach the screen, and top's own CPU.

A fake stream feeds the real app (the model, the table, Textual's compositor):
500 active agents in 10 groups, and every 100 ms a batch of status changes,
new agents and endings, and stalled flags raised and cleared (RATE events a second in all). Per batch it measures the
time from the batch being posted to the screen having been refreshed with it;
CPU is this process's (the app and the fake feed) over the run. The baseline is
the same app holding the same 500 agents with no churn, in the same run.

Goals: an update batch renders in <= 50 ms (p95), top's CPU < 10% of a core.
Run: python bench/top.py [SECONDS] [RATE]
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import threading
import time
from pathlib import Path

from orcr_core.top.app import Events, Snapshot, TopApp
from orcr_core.top.model import iso

AGENTS = 500
GROUPS = 10
SIZE = (200, 60)


def agent(i: int, now: float, status: str = "working") -> dict:
    return {
        "uuid": f"u{i}",
        "path": f"team_{i % GROUPS}/task_{i}",
        "provider": "claude" if i % 3 else "codex",
        "status": status,
        "exit_reason": None,
        "turn": 1 + i % 7,
        "created_at": iso(now - 600 + i),
        "started_at": iso(now - 600 + i),
        "turn_started_at": iso(now - 30),
        "idle_since": iso(now - 10) if status == "idle" else None,
    }


class FakeSource:
    """A watch.open stream without a server: a snapshot, then churn at ``rate``."""

    def __init__(self, rate: float):
        self.rate = rate
        self.app: TopApp | None = None
        self.stop_flag = threading.Event()
        self.seq = 1000
        self.next_id = AGENTS
        self.status = {}
        self.stalled: set[str] = set()

    def start(self):
        now = time.time()
        rows = [agent(i, now, random.choice(["working", "idle"])) for i in range(AGENTS)]
        self.status = {r["uuid"]: (r["path"], r["status"]) for r in rows}
        self.app.post_message(Snapshot({"snapshot_seq": self.seq, "agents": rows}))
        if self.rate:
            threading.Thread(target=self.churn, daemon=True).start()
        return self

    def stop(self):
        self.stop_flag.set()

    def resnapshot(self):
        raise AssertionError("the fake stream never gaps")

    def event(self, kind, uuid, **data):
        self.seq += 1
        return {"seq": self.seq, "ts": time.time(), "kind": kind, "agent": uuid, "data": data}

    def churn(self):
        per_batch = max(1, int(self.rate / 10))
        while not self.stop_flag.wait(0.1):
            batch = []
            for _ in range(per_batch):
                uuid = random.choice(list(self.status))
                path, st = self.status[uuid]
                if random.random() < 0.05:  # one ends, a new one is admitted
                    batch.append(
                        self.event(
                            "agent.status",
                            uuid,
                            path=path,
                            **{"from": st, "to": "ended", "exit_reason": "exited"},
                        )
                    )
                    del self.status[uuid]
                    new = f"u{self.next_id}"
                    npath = f"team_{self.next_id % GROUPS}/task_{self.next_id}"
                    self.next_id += 1
                    batch.append(self.event("agent.queued", new, path=npath, provider="claude"))
                    self.status[new] = (npath, "queued")
                elif st == "working" and random.random() < 0.1:  # the stalled flag flips
                    stalled = uuid not in self.stalled
                    self.stalled.symmetric_difference_update({uuid})
                    batch.append(self.event("agent.stalled", uuid, path=path, stalled=stalled))
                else:
                    self.stalled.discard(uuid)
                    to = {"working": "idle", "idle": "working", "queued": "working"}[st]
                    batch.append(
                        self.event("agent.status", uuid, path=path, **{"from": st, "to": to})
                    )
                    self.status[uuid] = (path, to)
            msg = Events(batch)
            msg.posted_at = time.perf_counter()
            self.app.post_message(msg)


class BenchApp(TopApp):
    def __init__(self, source):
        super().__init__(Path("/nonexistent/orcr.sock"), source=source)
        source.app = self
        self.latencies: list[float] = []
        self.handle_ms: list[float] = []

    def on_events(self, msg):
        t = time.perf_counter()
        super().on_events(msg)
        self.handle_ms.append((time.perf_counter() - t) * 1000)
        posted = msg.posted_at
        self.call_after_refresh(
            lambda: self.latencies.append((time.perf_counter() - posted) * 1000)
        )

    def refresh_status(self):  # no server behind the fake stream
        pass

    def _ask_answers(self):
        pass


async def measure(seconds: float, rate: float) -> dict:
    app = BenchApp(FakeSource(rate))
    async with app.run_test(size=SIZE) as pilot:
        while not app.connected:
            await pilot.pause(0.01)
        await pilot.pause(1.0)  # the first full draw is not a batch
        app.latencies.clear()
        app.handle_ms.clear()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await pilot.pause(seconds)
        cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0) * 100
        applied = app.model.applied
    return {
        "cpu": cpu,
        "lat": sorted(app.latencies),
        "handle": sorted(app.handle_ms),
        "applied": applied,
    }


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")


def main(seconds: float = 10.0, rate: float = 200.0) -> None:
    base = asyncio.run(measure(seconds, 0))
    churn = asyncio.run(measure(seconds, rate))
    lat = churn["lat"]
    print(
        f"{AGENTS} agents, {rate:.0f} events/s in batches every 100 ms, {seconds:.0f} s, headless {SIZE[0]}x{SIZE[1]}"
    )
    print(f"batches {len(lat)}  events applied {churn['applied']}")
    print(
        f"batch handling (model + table)   p50 {statistics.median(churn['handle']):6.1f} ms  p95 {pct(churn['handle'], 0.95):6.1f} ms"
    )
    print(
        f"batch to screen (incl. paint)    p50 {statistics.median(lat):6.1f} ms  p95 {pct(lat, 0.95):6.1f} ms  max {lat[-1]:6.1f} ms  (goal p95 <= 50)"
    )
    print(f"top CPU, no churn (baseline)     {base['cpu']:5.1f}% of a core")
    print(f"top CPU, churn                   {churn['cpu']:5.1f}% of a core  (goal < 10)")
    print(f"ratio churn/baseline CPU {churn['cpu'] / max(base['cpu'], 0.1):.2f}")


if __name__ == "__main__":
    main(*(float(a) for a in sys.argv[1:3]))
