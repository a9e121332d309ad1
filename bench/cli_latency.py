"""Median wall time of `orcr agent run` (server warm) / `python -c pass`, same run.

Goal: <= 4.5. Run: python bench/cli_latency.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import bench_server  # noqa: E402


def median_wall(argv, env, n):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(n: int = 30) -> None:
    orcr = str(Path(sys.executable).with_name("orcr"))
    with bench_server("[concurrency]\nmax = 1\n") as (home, env):
        subprocess.run(
            [orcr, "agent", "ls"], env=env, check=True, stdout=subprocess.DEVNULL
        )  # warm
        base = median_wall([sys.executable, "-c", "pass"], env, n)
        runs = iter(range(10**6))
        run = median_wall([orcr, "agent", "run", "--provider", "testp", "x"], env, n)
        _ = runs
    print(f"python -c pass      median {base * 1000:7.1f} ms")
    print(f"orcr agent run      median {run * 1000:7.1f} ms")
    print(f"ratio {run / base:.2f} (goal <= 4.5)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
