"""Admission under a loaded CPU, against the same measurements on the same machine
without the load, in the same run.

Issue 19: ``orcr agent run`` called one after another took 0.9-1.8 s per call with the
system at 100% CPU, 0.08 s on a quiet machine. Nothing in orcr waits on the load: every
process is slowed alike. This shows it. With every core kept busy by spinning processes
(``_harness.cpu_load``, one per CPU) it measures, against a server on the test driver
(``_harness.bench_server``):

* the median wall time of ``orcr agent run`` (a new CLI process each: Python start,
  the socket, admission), and of ``python -c pass`` as the yardstick any process pays;
* agents admitted per second over one SDK connection (``Orcr.run_many``).

Each figure is given loaded and quiet, and as the ratio loaded / quiet. Goal: ``agent
run`` slows at most twice as much as ``python -c pass`` does (``run/pass`` under load at
most 2 times its quiet value): orcr adds no wait of its own, but a call is CPU work in
two processes (the CLI and the server's thread), each competing with the load.

Run: python bench/admission_loaded.py [N]   (N CLI calls per phase, default 15)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from _harness import bench_server, cpu_load  # noqa: E402


def _median_wall(argv: list[str], env: dict, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _sdk_rate(home: Path, n: int, tag: str) -> float:
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client

    with Orcr(Client(home / "run" / "orcr.sock", autostart=False)) as o:
        specs = [dict(prompt="x", provider="testp", path=f"{tag}/a{i}", cwd="/") for i in range(n)]
        t = time.perf_counter()
        results = o.run_many(specs)
        rate = n / (time.perf_counter() - t)
        assert all("uuid" in r for r in results), results[:3]
        return rate


def phase(home: Path, env: dict, n: int, tag: str) -> dict:
    orcr = [sys.executable, "-m", "orcr_core.cli"]
    return {
        "pass": _median_wall([sys.executable, "-c", "pass"], env, n),
        "run": _median_wall([*orcr, "agent", "run", "--provider", "testp", "x"], env, n),
        "sdk": _sdk_rate(home, 20 * n, tag),
    }


def main(n: int = 15) -> None:
    load = os.getloadavg()
    # max = 1: promotion stays out of the way after the first agent
    with bench_server("[concurrency]\nmax = 1\n") as (home, env):
        subprocess.run(  # warm: the server's first answers, the page cache
            [sys.executable, "-m", "orcr_core.cli", "agent", "ls"], env=env, check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        quiet = phase(home, env, n, "q")
        with cpu_load() as hogs:
            loaded = phase(home, env, n, "l")
    print(f"load average before the run {load[0]:.2f}; {hogs} spinning processes for the load")
    print(f"{'':28}{'quiet':>10}{'loaded':>10}{'loaded/quiet':>14}")
    for key, label, unit in (
        ("pass", "python -c pass median", "ms"),
        ("run", "orcr agent run median", "ms"),
    ):
        q, ld = quiet[key] * 1000, loaded[key] * 1000
        print(f"{label:28}{q:8.1f}{unit}{ld:8.1f}{unit}{ld / q:14.2f}")
    q, ld = quiet["sdk"], loaded["sdk"]
    print(f"{'SDK run_many admissions/s':28}{q:10.0f}{ld:10.0f}{ld / q:14.2f}")
    rq, rl = quiet["run"] / quiet["pass"], loaded["run"] / loaded["pass"]
    print(f"run/pass quiet {rq:.2f}, loaded {rl:.2f}: ratio {rl / rq:.2f} (goal <= 2)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
