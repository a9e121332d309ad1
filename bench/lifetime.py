"""Server CPU per agent lifetime (issue 39 item 3): echo agents on real tmux, all live
at once, each taken through run (admission, promotion, start, turn 1), `send` (turn
2) and kill, with the server's CPU (``/proc/<pid>/stat``, every thread) read between
the phases and divided by N.

Goal: <= 30 ms per lifetime for the echo agent. Where the real Claude Code CLI is
installed it is not run here (it costs money); this bench is the echo figure.

    python bench/lifetime.py [--n 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import cpu_seconds  # noqa: E402
from idle import Fleet  # noqa: E402

GOAL_MS = 30.0


def _all(o, n: int, done, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        agents = [a for a in o.list(prefix="life", all=True) if a["path"].startswith("life/")]
        if len(agents) == n and all(done(a) for a in agents):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {sorted({a['status'] for a in agents})}")
        time.sleep(0.2)


def main(n: int) -> None:
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client

    fleet = Fleet("tmux", n, poll_only=False)
    try:
        pid = fleet.proc.pid
        time.sleep(2.0)  # the start settles
        phases = []
        with Orcr(Client(fleet.home / "run" / "orcr.sock", autostart=False)) as o:
            c = cpu_seconds(pid)

            def mark(name):
                nonlocal c
                now = cpu_seconds(pid)
                phases.append((name, (now - c) * 1000 / n))
                c = now

            for i in range(n):
                o.run("hi", provider="echo", path=f"life/a{i}", cwd="/tmp")
            _all(o, n, lambda a: a["status"] == "idle" and a["turn"] >= 1, "turn 1", 60 + 2 * n)
            mark("run + turn 1")
            for i in range(n):
                o.send(f"life/a{i}", "again")
            _all(o, n, lambda a: a["status"] == "idle" and a["turn"] >= 2, "turn 2", 60 + n)
            mark("send + turn 2")
            o.kill("life/*")
            _all(o, n, lambda a: a["status"] == "ended", "kill", 60 + n)
            mark("kill")
    finally:
        fleet.close()
    total = sum(ms for _, ms in phases)
    print(f"echo agents on tmux, N = {n}, all live at once; server CPU per agent:")
    for name, ms in phases:
        print(f"  {name:15} {ms:7.1f} ms")
    print(f"  {'lifetime':15} {total:7.1f} ms (goal <= {GOAL_MS:.0f})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40)
    main(ap.parse_args().n)
