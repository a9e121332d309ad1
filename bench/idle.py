"""Idle cost: what the server itself costs while N echo agents sit idle (issue 9).

For each multiplexer (real tmux; the herdr emulator, run inside this script) and
each N, start a private server, run N echo agents with no prompt, wait until all
are idle and every transcript is watched (an echo agent is idle before its process
has written its transcript: until then it is polled, the tail of the start, not
idleness; under load that tail lasts 10-30 s), then measure over a window (30 s by
default: one ``timings.reconcile_every``, so one reconciliation pass falls in it):

* the server's CPU, from ``/proc/<pid>/stat`` (utime + stime of the process,
  every thread included), as a percentage of one core;
* its RSS (``VmRSS``);
* the store write transactions it began per second (``server status``);
* the turn-end latency: a ``prompt`` line then a ``turn_end`` line appended to an
  idle agent's transcript, timed from the write of ``turn_end`` to the ``ts`` of
  the ``idle`` status event in the store, p50 over a few samples.

The baseline measured in the same run is the same fleet with notifications off
(``ORCR_WATCH_LIMIT=0``: every transcript polled every ``timings.poll_every``),
printed as the ratio ``cpu/poll``.

    python bench/idle.py                      # N in 10 100 250, tmux and herdr, 30 s
    python bench/idle.py --n 100 --mux tmux --window 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import bench_env, idle_window, start_server, stop_server, until  # noqa: E402

#: issue 39's goals by N: server CPU (% of one core), RSS (MiB), turn-end p50 (ms)
GOALS = {100: {"cpu": 0.3, "rss": 50.0, "lat": 5.0}, 250: {"lat": 5.0}}


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Fleet:
    def __init__(self, mux: str, n: int, poll_only: bool):
        self.mux, self.n, self.poll_only = mux, n, poll_only
        self.home = Path(tempfile.mkdtemp(prefix="orcr-idle-", dir="/tmp"))
        self.emulator = None
        if mux == "tmux":
            self.mux_socket = self.home / "tmux.sock"
            driver = f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{self.mux_socket}"\n'
        else:
            from orcr_testing.herdr.emulator import Emulator

            self.mux_socket = self.home / "herdr.sock"
            self.emulator = Emulator(
                self.mux_socket, self.home / "herdr-state", shell=["/bin/sh"]
            ).start()
            driver = f'[driver]\nname = "herdr"\n[herdr]\nsocket = "{self.mux_socket}"\n'
        (self.home / "config.toml").write_text(driver + f"[concurrency]\nmax = {n + 5}\n")
        self.env = bench_env(self.home)
        if poll_only:
            self.env["ORCR_WATCH_LIMIT"] = "0"
        self.proc = start_server(self.env, log=open(self.home / "server.out", "ab"))

    def start_agents(self) -> list[dict]:
        from orcr_core.sdk import Orcr
        from orcr_core.sdk.client import Client

        with Orcr(Client(self.home / "run" / "orcr.sock", autostart=False)) as o:
            for i in range(self.n):
                o.run(None, provider="echo", path=f"idle/a{i}", cwd="/tmp")
            deadline = time.monotonic() + 60 + self.n
            while True:
                agents = o.list()
                if sum(a["status"] == "idle" for a in agents) == self.n:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.n} agents did not all become idle")
                time.sleep(0.5)
            self.idle_at = time.monotonic()
            while not self.poll_only:  # every transcript written and watched: settled
                m = o.status()["monitor"]
                if m["transcripts_notified"] == self.n and m["transcripts_polled"] == 0:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.n} transcripts not all watched: {m}")
                time.sleep(0.5)
            self.settled_after = time.monotonic() - self.idle_at
            return agents

    def idle_event_ts(self, uuid: str, after_seq: int) -> tuple[float, int] | None:
        conn = sqlite3.connect(f"file:{self.home / 'store.db'}?mode=ro", uri=True)
        try:
            for seq, ts, data in conn.execute(
                "SELECT seq, ts, data FROM event WHERE agent = ? AND kind = 'agent.status' "
                "AND seq > ? ORDER BY seq",
                (uuid, after_seq),
            ):
                if json.loads(data).get("to") == "idle":
                    return ts, seq
        finally:
            conn.close()
        return None

    def last_seq(self) -> int:
        conn = sqlite3.connect(f"file:{self.home / 'store.db'}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT COALESCE(MAX(seq), 0) FROM event").fetchone()[0]
        finally:
            conn.close()

    def turn_end_latency(self, agents: list[dict], samples: int) -> list[float]:
        out = []
        for i in range(samples):
            a = agents[i % len(agents)]
            path = self.home / "agents" / a["uuid"] / "echo.jsonl"
            turn = 1000 + i
            seq = self.last_seq()
            with path.open("a") as f:
                f.write(json.dumps({"type": "prompt", "turn": turn, "text": "x"}) + "\n")
            until(lambda a=a: self._status_is(a["uuid"], "working"), interval=0.002)
            seq = self.last_seq()
            with path.open("a") as f:
                f.write(json.dumps({"type": "answer", "turn": turn, "text": "x"}) + "\n")
                f.flush()
                written = time.time()
                f.write(json.dumps({"type": "turn_end", "turn": turn, "status": "completed"}))
                f.write("\n")
            found = until(lambda a=a, seq=seq: self.idle_event_ts(a["uuid"], seq), interval=0.002)
            out.append(found[0] - written)
        return out

    def _status_is(self, uuid: str, status: str) -> bool:
        conn = sqlite3.connect(f"file:{self.home / 'store.db'}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT status FROM agent WHERE uuid = ?", (uuid,)).fetchone()
        finally:
            conn.close()
        return bool(row) and row[0] == status

    def close(self) -> None:
        stop_server(self.proc)
        if self.mux == "tmux":
            subprocess.run(["tmux", "-S", str(self.mux_socket), "kill-server"], capture_output=True)
        else:
            self.emulator.stop()
        shutil.rmtree(self.home, ignore_errors=True)


def measure(mux: str, n: int, window: float, samples: int, poll_only: bool = False) -> dict:
    fleet = Fleet(mux, n, poll_only)
    try:
        agents = fleet.start_agents()
        r = idle_window(fleet.proc, fleet.env, window)
        rss = _rss_mib(fleet.proc.pid)
        lat = fleet.turn_end_latency(agents, samples) if samples else []
        return {
            "mux": mux,
            "n": n,
            "cpu_pct": r["cpu_pct"],
            "rss_mib": rss,
            "writes_per_s": r["writes_per_s"],
            "latency_p50_ms": 1000 * statistics.median(lat) if lat else None,
            "latency_max_ms": 1000 * max(lat) if lat else None,
            "settled_s": fleet.settled_after,
        }
    finally:
        fleet.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10, 100, 250])
    ap.add_argument("--mux", nargs="+", default=["tmux", "herdr"], choices=["tmux", "herdr"])
    ap.add_argument("--window", type=float, default=30.0, help="seconds of idleness measured")
    ap.add_argument("--samples", type=int, default=20, help="turn-end latency samples")
    ap.add_argument("--no-baseline", action="store_true", help="skip the polling baseline")
    args = ap.parse_args()
    print(
        "mux    N    cpu%  poll-cpu%  cpu/poll  rss MiB  writes/s  turn-end p50 ms (max)"
        "  settled s  goals (cpu%, MiB, p50 ms)"
    )
    ok = True
    for mux in args.mux:
        for n in args.n:
            r = measure(mux, n, args.window, args.samples)
            base = None
            if not args.no_baseline:
                base = measure(mux, n, args.window, 0, poll_only=True)["cpu_pct"]
            goal = GOALS.get(n, {})
            met = [
                r[key] is None or r[key] <= goal[g]
                for key, g in (("cpu_pct", "cpu"), ("rss_mib", "rss"), ("latency_p50_ms", "lat"))
                if g in goal
            ]
            ok &= all(met)
            p50, pmax = r["latency_p50_ms"], r["latency_max_ms"]
            print(
                f"{mux:6} {n:4} {r['cpu_pct']:6.2f} "
                f"{base if base is not None else float('nan'):9.2f} "
                f"{(r['cpu_pct'] / base) if base else float('nan'):9.2f} "
                f"{r['rss_mib']:8.1f} {r['writes_per_s']:9.2f}  "
                + (f"{p50:.1f} ({pmax:.1f})" if p50 is not None else "-")
                + f"  {r['settled_s']:9.1f}  "
                + (
                    " ".join(str(goal.get(g, "-")) for g in ("cpu", "rss", "lat"))
                    + (" met" if all(met) else " NOT met")
                    if goal
                    else "-"
                ),
                flush=True,
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
