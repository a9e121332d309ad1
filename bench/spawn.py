"""Promotion latency after a slot frees: from the event that frees the slot
(``agent.status`` -> ended) to the next agent's ``queued -> starting``, read off
the event rows' timestamps. Goal: p50 <= 20 ms.

Run: python bench/spawn.py [N]
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from _harness import bench_server  # noqa: E402


def main(n: int = 100) -> None:
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client

    with bench_server("[concurrency]\nmax = 1\n") as (home, env):
        with Orcr(Client(home / "run" / "orcr.sock", autostart=False)) as o:
            uuids = [
                o.run("x", provider="testp", path=f"s/a{i}", cwd="/")["uuid"] for i in range(n + 1)
            ]
            for uuid in uuids[:-1]:
                while o.get(uuid)["status"] != "working":
                    time.sleep(0.002)
                o.kill(uuid)  # frees the slot: the next agent is promoted
        conn = sqlite3.connect(home / "store.db")
        rows = conn.execute(
            "SELECT ts, agent, data FROM event WHERE kind = 'agent.status' ORDER BY seq"
        )
        freed, lat = None, []
        for ts, _agent, data in rows:
            d = json.loads(data)
            if d["to"] == "ended":
                freed = ts
            elif d["to"] == "starting" and freed is not None:
                lat.append((ts - freed) * 1000)
                freed = None
        conn.close()
    lat.sort()
    p50 = statistics.median(lat)
    p95 = lat[int(len(lat) * 0.95) - 1]
    print(f"promotions measured {len(lat)}")
    print(
        f"promotion latency after a slot frees: p50 {p50:.2f} ms, p95 {p95:.2f} ms (goal p50 <= 20 ms)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
