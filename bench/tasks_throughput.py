"""Task queue throughput (issue 26 item 5): claims per second on the file backend and
on PostgreSQL with 1, 8 and 32 concurrent workers, no agents (claim, heartbeat,
finish), against a baseline measured in the same run: a raw ``SKIP LOCKED`` claim
loop in SQL on the same PostgreSQL (claim one row, mark it done).

    python bench/tasks_throughput.py [--tasks 400] [--workers 1,8,32] [--url URL]

Each worker is a process of its own (as workers on several hosts would be), each
opening the queue itself; all start together and the clock runs until every task
is finished. PostgreSQL is a throwaway cluster (orcr_testing.tasks.PgCluster, as
in the tests: fsync off) unless ``--url`` names a database to use. Prints a Markdown
table (docs/tasks.md, "Throughput").
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# the test distribution (testing/: PgCluster), importable from the checkout
sys.path.append(str(Path(__file__).resolve().parent.parent / "testing"))


def _tasks_worker(spec: str, start, done) -> None:
    from orcr_tasks.opener import open_queue

    q = open_queue(spec)
    q.lock_wait = 3600.0  # as a worker waits (stale/2): 32 processes queue for the file lock
    info = {"pid": os.getpid(), "host": "bench", "slot": 0}
    start.wait()
    n = 0
    while True:
        token = f"{os.getpid()}-{n}"
        tid = q.claim("builder", token, info)
        if tid is None:
            break
        q.touch(tid)  # one heartbeat
        q.finish_build(tid, token, "r1", "bench")
        n += 1
    done.put(n)


def _raw_worker(conninfo: str, start, done) -> None:
    import psycopg

    conn = psycopg.connect(conninfo, autocommit=True)
    start.wait()
    n = 0
    while True:
        row = conn.execute(
            "UPDATE bench_jobs SET state = 'doing', hb_at = now() WHERE id = ("
            "SELECT id FROM bench_jobs WHERE state = 'todo' ORDER BY id LIMIT 1 "
            "FOR UPDATE SKIP LOCKED) RETURNING id"
        ).fetchone()
        if row is None:
            break
        conn.execute("UPDATE bench_jobs SET hb_at = now() WHERE id = %s", [row[0]])
        conn.execute("UPDATE bench_jobs SET state = 'done' WHERE id = %s", [row[0]])
        n += 1
    done.put(n)


def _race(target, arg, workers: int) -> float:
    ctx = mp.get_context("fork")
    start, done = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(arg, start, done)) for _ in range(workers)]
    for p in procs:
        p.start()
    time.sleep(0.5 + workers * 0.05)  # every worker connected and waiting
    t0 = time.perf_counter()
    start.set()
    total = sum(done.get(timeout=600) for _ in procs)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join()
    return total / elapsed


def file_rate(tasks: int, workers: int) -> float:
    from orcr_tasks.queue import Queue

    d = Path(tempfile.mkdtemp(prefix="orcr-bench-", dir="/tmp"))
    try:
        q = Queue.init(d / "q")
        for i in range(tasks):
            q.add(f"task {i}", "x", task_id=f"t{i}")
        return _race(_tasks_worker, str(q.root), workers)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def pg_rate(url: str, tasks: int, workers: int) -> float:
    from orcr_tasks.pg import PgQueue

    q = PgQueue.init(url.replace("queue=", f"queue=b{workers}_{int(time.time())}x"))
    with q.db.atomic():
        for i in range(tasks):
            q.add(f"task {i}", "x", task_id=f"t{i}")
    q.db.close()
    return _race(_tasks_worker, q.label, workers)


def raw_rate(url: str, tasks: int, workers: int) -> float:
    import psycopg
    from orcr_tasks.pg.url import parse

    conninfo = parse(url).conninfo
    with psycopg.connect(conninfo, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS bench_jobs")
        c.execute(
            "CREATE TABLE bench_jobs (id serial PRIMARY KEY, state text NOT NULL, "
            "hb_at timestamptz)"
        )
        c.execute("CREATE INDEX ON bench_jobs (state, id)")
        c.execute(
            "INSERT INTO bench_jobs (state) SELECT 'todo' FROM generate_series(1, %s)", [tasks]
        )
    return _race(_raw_worker, conninfo, workers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=400)
    ap.add_argument("--workers", default="1,8,32")
    ap.add_argument(
        "--url", help="a postgresql:// URL with ?queue=bench (default: a throwaway cluster)"
    )
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    cluster = None
    url = args.url
    if url is None:
        from orcr_testing.tasks import PgCluster

        cluster = PgCluster().start()
        url = cluster.url("postgres", "bench")
    try:
        rows = []
        for w in counts:
            rows.append((w, file_rate(args.tasks, w), pg_rate(url, args.tasks, w),
                         raw_rate(url, args.tasks, w)))  # fmt: skip
            print(f"{w} workers: file {rows[-1][1]:.0f}/s, postgresql {rows[-1][2]:.0f}/s, "
                  f"raw SKIP LOCKED {rows[-1][3]:.0f}/s", file=sys.stderr, flush=True)  # fmt: skip
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"\n{args.tasks} tasks; claims finished per second (claim, heartbeat, finish)\n")
    print("| workers | file queue | PostgreSQL queue | raw SKIP LOCKED loop |")
    print("|---|---|---|---|")
    for w, f, p, r in rows:
        print(f"| {w} | {f:.0f} | {p:.0f} | {r:.0f} |")
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
