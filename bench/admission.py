"""Agent runs admitted per second over one SDK connection, divided by a raw sqlite3
BEGIN IMMEDIATE insert-plus-event rate on the same machine, same pragmas, same run.

Each admission is a full one: validation, the agent's data dir and launch.json
(0600) written before the row, the row and its event in one BEGIN IMMEDIATE
transaction, the reply sent after the commit. The SDK pipelines requests
(``Orcr.run_many``) and the server group-commits the buffered ones; the baseline
does only the two inserts. Both run in ORCR_BENCH_DIR (default /tmp; /dev/shm
takes the disk out: on a VM disk the two inode creations per admission that the
spec requires before the insert vary twentyfold from run to run).

Goal: >= 0.25. Run: python bench/admission.py [N]
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from _harness import BENCH_DIR, bench_server  # noqa: E402


def raw_rate(n: int) -> float:
    d = tempfile.mkdtemp(prefix="orcr-raw-", dir=BENCH_DIR)
    conn = sqlite3.connect(os.path.join(d, "raw.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA synchronous=normal")
    conn.execute(
        "CREATE TABLE agent (id INTEGER PRIMARY KEY, uuid TEXT UNIQUE, path TEXT, "
        "status TEXT, queue_seq INTEGER, created_at REAL)"
    )
    conn.execute("CREATE UNIQUE INDEX a_path ON agent(path) WHERE status != 'ended'")
    conn.execute(
        "CREATE TABLE event (seq INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL, kind TEXT, "
        "agent TEXT, data TEXT)"
    )
    t = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO agent (uuid, path, status, queue_seq, created_at) VALUES (?,?,?,?,?)",
            (f"u{i}", f"p/a{i}", "queued", i, time.time()),
        )
        conn.execute(
            "INSERT INTO event (ts, kind, agent, data) VALUES (?,?,?,?)",
            (time.time(), "agent.queued", f"u{i}", json.dumps({"path": f"p/a{i}"})),
        )
        conn.execute("COMMIT")
    return n / (time.perf_counter() - t)


def sdk_rate(n: int) -> float:
    from orcr_core.client import Client
    from orcr_core.sdk import Orcr

    # max = 1: promotion stays out of the way after the first agent
    with bench_server("[concurrency]\nmax = 1\n") as (home, env):
        with Orcr(Client(home / "run" / "orcr.sock", autostart=False)) as o:
            o.list()
            specs = [dict(prompt="x", provider="testp", path=f"b/a{i}", cwd="/") for i in range(n)]
            t = time.perf_counter()
            results = o.run_many(specs)  # pipelined: requests in flight while the server commits
            rate = n / (time.perf_counter() - t)
            assert all("uuid" in r for r in results), results[:3]
            return rate


def main(n: int = 2000) -> None:
    raw = raw_rate(n)
    sdk = sdk_rate(n)
    print(f"raw sqlite3 BEGIN IMMEDIATE insert+event  {raw:9.0f} /s")
    print(f"orcr agent.run over one SDK connection    {sdk:9.0f} /s")
    print(f"ratio {sdk / raw:.3f} (goal >= 0.25)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
