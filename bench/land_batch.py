"""Landing with batches (issue 37 item 5): tasks landed per check run, and the wall
time, for ``orcr tasks land --batch K`` at several K, on a file queue and a real git
repository, no agents.

    python bench/land_batch.py [--tasks 24] [--batches 1,4,8] [--red 0,0.1] [--check-seconds 0.5]

Each run makes a fresh repository and queue with ``--tasks`` tasks, each built on its
own branch (a commit adding its own file) and passed by a verifier through the queue's
own moves, as in plugins/tasks/tests/test_tasks_land.py; a fraction ``--red`` of them
(spread evenly) write ``BAD`` into their file. The check is ``sleep S; ! grep -q BAD
*.txt``: each task is green alone except the red ones, so every lander lands the same
tasks and sends back the same ones, and the figure is how many check runs it took.
Prints a Markdown table (docs/tasks.md, "Batches").
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "tasks"))


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def setup(root: Path, n: int, red: float):
    from orcr_tasks.queue import Queue

    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "b@example.com")
    git(repo, "config", "user.name", "bench")
    (repo / "base.txt").write_text("base\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    q = Queue.init(root / "queue")
    reds = {round(i / red) for i in range(1, int(n * red) + 1)} if red else set()
    for i in range(1, n + 1):
        tid = f"T{i}"
        q.add(f"change {tid}", "the check passes", task_id=tid)
        assert q.claim("builder", token="b") == tid
        branch = f"tasks/q/{tid}/a1"
        git(repo, "checkout", "-q", "-B", branch, "main")
        (repo / f"{tid}.txt").write_text("BAD\n" if i in reds else "ok\n")
        git(repo, "add", ".")
        git(repo, "commit", "-qm", f"{tid} change")
        rev = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "-q", "main")
        q.finish_build(tid, "b", rev, "echo", branch=branch)
        assert q.claim("verifier", token="v") == tid
        assert q.verdict(tid, "v", True, "codex", "VERDICT: pass") == "done"
    return q, repo, len(reds)


def run(n: int, batch: int, red: float, seconds: float) -> dict:
    from orcr_tasks.land.lander import Lander

    root = Path(tempfile.mkdtemp(prefix="orcr-land-bench-"))
    try:
        q, repo, reds = setup(root, n, red)
        check = f"sleep {seconds}; ! grep -q BAD *.txt"
        lander = Lander(q, str(repo), check=check, say=lambda m: None)
        t0 = time.monotonic()
        counts = lander.run(batch=batch)
        wall = time.monotonic() - t0
        assert counts["landed"] == n - reds and counts["failed"] == reds, counts
        return {"landed": counts["landed"], "red": reds, "checks": lander.checks, "wall": wall}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--red", default="0,0.1")
    ap.add_argument("--check-seconds", type=float, default=0.5)
    a = ap.parse_args()
    print(f"{a.tasks} tasks, a check of {a.check_seconds} s + git's work on the tree\n")
    print("| batch | red tasks | landed | check runs | landed per check | wall |")
    print("|---|---|---|---|---|---|")
    for red in (float(x) for x in a.red.split(",")):
        for batch in (int(x) for x in a.batches.split(",")):
            r = run(a.tasks, batch, red, a.check_seconds)
            print(
                f"| {batch} | {r['red']} | {r['landed']} | {r['checks']} | "
                f"{r['landed'] / r['checks']:.2f} | {r['wall']:.1f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
