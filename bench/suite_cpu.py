"""CPU per test, every process a test starts included (issue 34: where the suite's time goes).

A pytest plugin and its report. Each xdist worker moves itself into a cgroup v1
*cpuacct* group of its own (``/sys/fs/cgroup/cpuacct/orcr-suite-cpu/<worker>``), so
everything a test starts (servers that double-fork, tmux, panes, agents, CLI
processes) is counted there; the worker reads ``cpuacct.usage`` before and after each
test and appends one JSON line per test. Needs root and a cpuacct hierarchy (this
machine has both); a process a test leaves running is counted in later tests.

    PYTHONPATH=bench python -m pytest -q -p suite_cpu --reruns 0   # writes /tmp/suite-cpu.jsonl
    python bench/suite_cpu.py [/tmp/suite-cpu.jsonl]                # the report

``SUITE_CPU_OUT`` names another output file. The report prints the total, the e2e
share, the workers' own share (``own``: ``time.process_time()``), the files and tests that cost most, and the multiplexer legs' shares
(``[tmux]``, ``[herdr]``, ``[herdr08]``). Figures: docs/internals.md "Running the tests".
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys
import time

import pytest

ROOT = "/sys/fs/cgroup/cpuacct/orcr-suite-cpu"
OUT = os.environ.get("SUITE_CPU_OUT", "/tmp/suite-cpu.jsonl")
_group: str | None = None


def _usage() -> float:
    with open(os.path.join(_group, "cpuacct.usage")) as fh:
        return int(fh.read()) / 1e9


def pytest_configure(config) -> None:
    global _group
    worker = os.environ.get("PYTEST_XDIST_WORKER", "serial")
    if not os.path.isdir(os.path.dirname(ROOT)):
        raise pytest.UsageError(f"suite_cpu: no cpuacct hierarchy at {os.path.dirname(ROOT)}")
    if worker == "serial" and config.getoption("dist", "no") != "no":
        return  # the xdist controller runs no test
    _group = os.path.join(ROOT, worker)
    os.makedirs(_group, exist_ok=True)
    with open(os.path.join(_group, "cgroup.procs"), "w") as fh:
        fh.write(str(os.getpid()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _group is None:
        yield
        return
    cpu, wall, own = _usage(), time.monotonic(), time.process_time()
    yield
    row = {
        "id": item.nodeid,
        "cpu": round(_usage() - cpu, 3),
        "wall": round(time.monotonic() - wall, 3),
        # the worker's own share: the test's code, its polls, in-process emulators
        "own": round(time.process_time() - own, 3),
        "e2e": item.get_closest_marker("e2e") is not None,
    }
    with open(OUT, "a") as fh:
        fh.write(json.dumps(row) + "\n")


def _leg(nodeid: str) -> str:
    params = re.search(r"\[(.*)\]$", nodeid)
    if params is None:
        return "unparametrised"
    parts = params.group(1).split("-")
    return next((leg for leg in ("herdr08", "herdr", "tmux") if leg in parts), "other")


def report(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    total = sum(r["cpu"] for r in rows)
    e2e = [r for r in rows if r["e2e"]]
    print(
        f"{len(rows)} tests, {total:.0f} s of CPU, worker wall summed {sum(r['wall'] for r in rows):.0f} s"
    )
    print(f"e2e: {len(e2e)} tests, {sum(r['cpu'] for r in e2e):.0f} s of CPU")
    own = sum(r.get("own", 0.0) for r in rows)
    print(f"in the pytest workers themselves: {own:.0f} s (the rest: what the tests started)")
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    legs: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        for table, key in ((files, r["id"].split("::")[0]), (legs, _leg(r["id"]))):
            table[key][0] += 1
            table[key][1] += r["cpu"]
    print("\nby leg (tests, CPU s):")
    for leg, (n, cpu) in sorted(legs.items(), key=lambda kv: -kv[1][1]):
        print(f"  {leg:15} {n:5d} {cpu:7.0f}")
    print("\nfiles by CPU (s, tests):")
    for name, (n, cpu) in sorted(files.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"  {cpu:7.1f} {n:4d} {name}")
    print("\ntests by CPU (s):")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:15]:
        print(f"  {r['cpu']:6.1f} {r['id']}")


if __name__ == "__main__":
    report(sys.argv[1] if len(sys.argv) > 1 else OUT)
