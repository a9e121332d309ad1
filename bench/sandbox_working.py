"""queued -> working with and without the sandbox, in one run: echo agents (a real TUI)
on a private tmux server, alternately sandboxed and not, one at a time, each timed from
its ``agent.queued`` event to its ``working`` status (read off the event rows).

    python bench/sandbox_working.py [N]      # N agents of each kind (default 10)

Prints the median of each and their ratio. docs/sandbox.md gives the figure.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from _harness import bench_env, start_server, stop_server  # noqa: E402


def main(n: int = 10) -> None:
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client

    home = Path(tempfile.mkdtemp(prefix="orcr-sbx-bench-", dir="/tmp"))
    mux = home / "tmux.sock"
    (home / "config.toml").write_text(f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{mux}"\n')
    work = home / "work"
    work.mkdir()
    proc = start_server(bench_env(home))
    kinds: dict[str, bool] = {}
    try:
        with Orcr(Client(home / "run" / "orcr.sock", autostart=False)) as o:
            for i in range(2 * n):
                boxed = i % 2 == 1
                uuid = o.run("hi", provider="echo", path=f"b/a{i}", cwd=str(work),
                             sandbox=boxed)["uuid"]  # fmt: skip
                kinds[uuid] = boxed
                o.wait(uuid, timeout=60)
                o.kill(uuid)
    finally:
        stop_server(proc)
        subprocess.run(["tmux", "-S", str(mux), "kill-server"], capture_output=True)
    conn = sqlite3.connect(home / "store.db")
    queued, took = {}, {True: [], False: []}
    for ts, agent, kind, data in conn.execute(
        "SELECT ts, agent, kind, data FROM event ORDER BY seq"
    ):
        if kind == "agent.queued":
            queued[agent] = ts
        elif kind == "agent.status" and json.loads(data).get("to") == "working":
            if agent in queued and agent in kinds:
                took[kinds[agent]].append((ts - queued.pop(agent)) * 1000)
    conn.close()
    shutil.rmtree(home, ignore_errors=True)
    plain, boxed = statistics.median(took[False]), statistics.median(took[True])
    print(f"queued -> working, median of {n} each: plain {plain:.0f} ms, sandboxed {boxed:.0f} ms, "
          f"ratio {boxed / plain:.2f}")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
