"""Ceilings under a storm (issue 35 item 8): 20 echo agents and 3 hogs on real tmux.

Each hog is a ``command`` agent that grows by 8 MiB steps to three times its
``--memory-max`` (bounded: it exits 3 if it ever gets there). The figures:

* how each hog ended (expected: ``oom``, with the ceiling and the peak in its error);
* whether every echo agent is still live and answers a prompt after the storm;
* the server's RSS and CPU (a percentage of one core) over a quiet window and over
  the storm window;
* ``orcr agent ls`` latency (p50 of the CLI process, in ms) during the storm
  against the quiet run, as a ratio.

Needs root and the cgroup v1 controllers (docs/ceilings.md).

    python bench/ceilings.py                     # 20 echo, 3 hogs of 128 MiB
    python bench/ceilings.py --echo 20 --hogs 3 --ceiling 128
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import bench_env, cpu_seconds, orcr, start_server, stop_server, until  # noqa: E402


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _ls_ms(env: dict, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        orcr(env, "agent", "ls")
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--echo", type=int, default=20)
    ap.add_argument("--hogs", type=int, default=3)
    ap.add_argument("--ceiling", type=int, default=128, help="each hog's --memory-max, MiB")
    ap.add_argument("--samples", type=int, default=10, help="agent ls calls per window")
    a = ap.parse_args()

    from orcr_core.ceilings import v1
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client

    why = v1.unusable()
    if why:
        sys.exit(f"bench/ceilings.py needs the cgroup v1 controllers: {why}")
    home = Path(tempfile.mkdtemp(prefix="orcr-ceil-", dir="/tmp"))
    sock = home / "tmux.sock"
    (home / "config.toml").write_text(
        f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{sock}"\n'
        f"[concurrency]\nmax = {a.echo + a.hogs + 5}\n"
    )
    env = bench_env(home)
    proc = start_server(env, log=open(home / "server.out", "ab"))
    hog = (
        "import time\nx = []\ntime.sleep(0.5)\n"
        f"while len(x) < {a.ceiling * 3 // 8}:\n    x.append(bytearray(8 << 20))\n"
        "    time.sleep(0.01)\nraise SystemExit(3)\n"
    )
    try:
        with Orcr(Client(home / "run" / "orcr.sock", autostart=False)) as o:
            for i in range(a.echo):
                o.run(None, provider="echo", path=f"fleet/e{i}", cwd="/tmp")
            until(lambda: all(r["status"] == "idle" for r in o.list(prefix="fleet")), 120)
            time.sleep(1.0)
            c0, t0 = cpu_seconds(proc.pid), time.monotonic()
            quiet = _ls_ms(env, a.samples)
            quiet_cpu = 100 * (cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0)
            quiet_rss = _rss_mib(proc.pid)
            started = {}
            for i in range(a.hogs):
                r = o.run(
                    None,
                    provider="command",
                    path=f"hogs/h{i}",
                    cwd="/tmp",
                    argv=[sys.executable, "-c", hog],
                    limits={"memory_max": f"{a.ceiling}MiB"},
                )
                started[r["path"]] = time.monotonic()
            c0, t0 = cpu_seconds(proc.pid), time.monotonic()
            storm = _ls_ms(env, a.samples)
            ended = until(
                lambda: (lambda rs: rs if all(r["status"] == "ended" for r in rs) else None)(
                    [o.get(p) for p in started]
                ),
                120,
            )
            storm_cpu = 100 * (cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0)
            storm_rss = _rss_mib(proc.pid)
            echoes = o.list(prefix="fleet")
            live = sum(r["status"] == "idle" for r in echoes)
            for r in echoes[:3]:  # they still take prompts
                o.send(r["path"], "after the storm")
            answered = until(
                lambda: all(o.get(r["path"])["status"] == "idle" for r in echoes[:3]), 60
            )
        print(f"hogs ({a.hogs}, --memory-max {a.ceiling}MiB, growing to {a.ceiling * 3} MiB):")
        for r in ended:
            print(f"  {r['path']}: {r['exit_reason']}: {r['error']}")
        print(f"echo agents live after the storm: {live}/{a.echo}; 3 answered a prompt: {answered}")
        print(f"server RSS MiB: quiet {quiet_rss:.1f}  storm {storm_rss:.1f}")
        print(f"server CPU % of a core: quiet {quiet_cpu:.1f}  storm {storm_cpu:.1f}")
        q, s = statistics.median(quiet), statistics.median(storm)
        print(f"agent ls p50 ms: quiet {q:.0f}  storm {s:.0f}  ratio {s / q:.2f}")
    finally:
        stop_server(proc)
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        import os

        from orcr_core import dirs

        os.environ["ORCR_HOME"] = str(home)
        v1.CgroupV1(dirs.instance_id()).drop_all()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
