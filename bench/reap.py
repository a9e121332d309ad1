"""A test teardown's ``OrcrHome.reap()``: the ``/proc`` walk against the test's freezer
cgroup (orcr_testing/procgroup.py), in one run.

The usual teardown: the server was stopped, nothing is left under the home, so reap is
one pass that finds nothing. The walk reads every process's environment on the machine
(its cost grows with the machine's process count: other workers, other users); the
group reads the group's ``cgroup.procs`` (the worker itself and what the test left).
Calls alternate, so load drifts hit both. Needs root and a cgroup v1 freezer hierarchy.

Run: python bench/reap.py [N]   (N reaps each, default 200)
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "testing"))
from orcr_testing import procgroup  # noqa: E402
from orcr_testing.home import OrcrHome  # noqa: E402


def main(n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="orcr-reap-", dir="/tmp"))
    group = procgroup.enter()
    if group is None:
        sys.exit("no writable cgroup v1 freezer hierarchy: only the /proc walk runs here")
    try:
        walk, tracked = OrcrHome(tmp, {}), OrcrHome(tmp, {}, group)
        times: dict[str, list[float]] = {"/proc walk": [], "freezer group": []}
        for _ in range(n):
            for name, home in (("/proc walk", walk), ("freezer group", tracked)):
                t = time.perf_counter()
                home.reap()
                times[name].append(time.perf_counter() - t)
    finally:
        group.leave()
        shutil.rmtree(tmp, ignore_errors=True)
    procs = sum(1 for e in os.scandir("/proc") if e.name.isdigit())
    print(f"{procs} processes on the machine, {n} reaps each, nothing left to kill")
    for name, ts in times.items():
        ms = sorted(t * 1000 for t in ts)
        print(
            f"{name:14} median {statistics.median(ms):7.3f} ms   p90 {ms[int(len(ms) * 0.9)]:7.3f} ms"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
