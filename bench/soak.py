"""Chaos soak (issue 27): a seeded, randomized run of the whole system under faults.

    python bench/soak.py --seconds 120 --seed 7

One orcr instance in a temporary ``ORCR_HOME`` on its own tmux socket, small caps
(``concurrency.max = 3``, ``echo = 2``; the ``command`` provider has no cap of its own),
parking and ``recovery.resume_lost`` on. Meanwhile:

- client threads, each a stream of CLI processes, admit echo agents that answer, fail
  (``[fail]``), hang past their ``--timeout``, exit by themselves, start idle and get a
  prompt, or are killed mid-turn, and ``command`` agents;
- loops fire (cron every minute, plus manual ``loop run start`` every few seconds), with
  ``--overlap queue`` and ``skip``, ``--max-concurrency`` 1 and 2, a run that fails
  (exit 3) and one that times out; each run's command admits and waits on an agent;
- a fault injector picks at random: SIGKILL the server and restart it, SIGSTOP/SIGCONT
  it, kill the tmux server, kill a loop supervisor, kill an agent's process tree.

Everything random comes from ``--seed`` (printed first, so a failure can be replayed;
thread timing still varies). At the end it stops the loops, ``agent kill '**'``,
``server stop``, looks for processes of the instance still alive, kills the tmux
server, and hands the store's events and that final state to :mod:`soak_check`,
whose verdict is the last line (``… violations: 0``); the exit code is 1 on any.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _soak_loops  # noqa: E402
import soak_check  # noqa: E402
from _harness import bench_env  # noqa: E402
from _soak_faults import Faults  # noqa: E402
from _soak_mux import DRIVERS  # noqa: E402
from _soak_tasks import Tasks  # noqa: E402

PY = sys.executable
CAPS = {"max": 3, "echo": 2}
MISSED_AFTER = 1.0  # loops.missed_after: a server down or stopped misses fires
CLOCK = Path(__file__).resolve().parent / "_soak_clock"  # the faked wall clock

#: config.toml past the driver's lines
CONFIG = (
    f"[concurrency]\nmax = {CAPS['max']}\necho = {CAPS['echo']}\n"
    'min_free_memory = "0"\n'
    '[timings]\npoll_every = "100ms"\ngc_after = "4s"\npark_after = "2s"\nreconcile_every = "5s"\n'
    'stop_grace = "1s"\nprompt_confirm = "1s"\nmax_starting = "30s"\n'
    "[recovery]\nresume_lost = true\n"
    f'[loops]\nmissed_after = "{MISSED_AFTER:g}s"\n'
)


class Instance:
    """The orcr under soak: its home, env, server process and CLI."""

    def __init__(self, home: Path, driver: str, disk: bool):
        self.home, self.disk = home, disk
        self.clock = home.parent / "clock"  # the wall clock's offset (bench/_soak_clock)
        self.clock.write_text("0\n")
        path = os.pathsep.join(filter(None, [str(CLOCK), os.environ.get("PYTHONPATH")]))
        self.env = bench_env(
            home,
            XDG_CONFIG_HOME=str(home / "xdg"),
            PYTHONPATH=path,
            ORCR_SOAK_CLOCK=str(self.clock),
        )
        self.env.pop("ORCR_FAULT", None)
        self.mux = DRIVERS[driver](home, self.env)
        (home / "config.toml").write_text(self.mux.config() + CONFIG)
        self.log = open(home.parent / "server.out", "ab")  # noqa: SIM115 - closed in stop()
        self.started: list[subprocess.Popen] = []

    def cli(self, *args: str, timeout: float = 60, cwd: str | None = None):
        try:
            return subprocess.run(
                [PY, "-m", "orcr_core.cli", *args],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=cwd,
            )
        except subprocess.TimeoutExpired:
            return None

    def servers(self) -> list[psutil.Process]:
        """The server processes of this home (one, or none while it is down)."""
        for proc in self.started:
            proc.poll()  # reap the servers this runner started (a killed one is a zombie)
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            try:
                cmd = p.info["cmdline"] or []
                if p.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                if "orcr_core.server" in cmd and p.environ().get("ORCR_HOME") == str(self.home):
                    found.append(p)
            except (psutil.Error, OSError):
                continue
        return found

    def start_server(self) -> None:
        if self.servers():
            return  # a CLI verb autostarted one meanwhile
        proc = subprocess.Popen(
            [PY, "-m", "orcr_core.server"],
            env=self.env,
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
        )
        self.started.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (self.home / "run" / "orcr.sock").exists():
            time.sleep(0.05)

    def store(self, sql: str) -> list:
        conn = sqlite3.connect(f"file:{self.home / 'store.db'}?mode=ro", uri=True, timeout=10)
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.Error:
            return []
        finally:
            conn.close()

    def truncate_wal(self) -> bool:
        """Checkpoint the store's ``-wal`` and truncate it to nothing (what SQLite does
        to it when the last connection closes): the next commits must grow it again,
        so on a full disk they are refused (``database or disk is full``). A ``-wal``
        already as large as the writes need is reused in place, and a full disk then
        refuses nothing (docs/internals.md "Chaos soak")."""
        try:
            conn = sqlite3.connect(self.home / "store.db", timeout=5)
        except sqlite3.Error:
            return False
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return not busy
        except sqlite3.Error:
            return False
        finally:
            conn.close()

    def processes(self) -> list[psutil.Process]:
        """Every process still carrying this home in its environment (not this one)."""
        found = []
        for p in psutil.process_iter(["pid"]):
            try:
                if p.pid != os.getpid() and p.environ().get("ORCR_HOME") == str(self.home):
                    found.append(p)
            except (psutil.Error, OSError):
                continue
        return found


class Workload:
    """Client threads admitting agents, and the loops' manual starts."""

    KINDS = ("answer", "answer", "fail", "hang", "exit", "idle_send", "kill", "command")

    def __init__(self, inst: Instance, seed: int, stop: threading.Event):
        self.inst, self.seed, self.stop = inst, seed, stop
        self.admitted: Counter = Counter()
        self.lock = threading.Lock()

    def client(self, tid: int) -> None:
        rng, n = random.Random(self.seed * 1000 + tid), 0
        while not self.stop.is_set():
            n += 1
            kind = rng.choice(self.KINDS)
            path = f"w{tid}/{kind}_{n}"
            run = ["agent", "run", "--provider", "echo", "--path", path]
            if kind == "command":
                run = ["agent", "run", "--provider", "command", "--path", path, "--",
                       "sh", "-c", f"sleep {rng.uniform(0.5, 3):.1f}"]  # fmt: skip
            elif kind == "hang":
                run += ["--timeout", "2s", "[sleep 60] hang"]
            elif kind == "fail":
                run += ["[fail] boom"]
            elif kind == "exit":
                run += [f"[sleep {rng.uniform(0, 1):.1f}] [exit] bye"]
            elif kind == "kill":
                run += ["[sleep 10] to be killed"]
            elif kind == "answer":
                run += [f"[sleep {rng.uniform(0.1, 2):.1f}] answer {n}"]
            res = self.inst.cli(*run)
            if res is None or res.returncode != 0:
                self.stop.wait(0.5)
                continue
            with self.lock:
                self.admitted[kind] += 1
            if kind == "kill":
                self.stop.wait(rng.uniform(0.5, 6))
                self.inst.cli("agent", "kill", path)
            elif kind == "idle_send":
                self.inst.cli("agent", "wait", path, "--timeout", "20s")
                self.inst.cli("agent", "send", path, f"[sleep {rng.uniform(0, 1):.1f}] again")
            self.inst.cli("agent", "wait", path, "--until", "ended", "--timeout", "25s")
            self.stop.wait(rng.uniform(0, 1.5))


def wind_down(inst: Instance, log, tasks: Tasks) -> dict:
    """Stop everything the orderly way, and say what was left: the checker's final state."""
    tasks.end()
    for p in inst.servers():
        p.send_signal(signal.SIGCONT)
    inst.start_server()
    for (name,) in inst.store("SELECT name FROM loop WHERE status != 'ended'"):
        inst.cli("loop", "rm", name)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        live = inst.store(
            "SELECT l.name, r.run_id FROM loop_run r JOIN loop l ON r.loop = l.uuid "
            "WHERE r.status IN ('pending', 'running', 'stopping')"
        )
        if not live:
            break
        for name, run_id in live:
            inst.cli("loop", "run", "stop", f"{name}/{run_id}")
        time.sleep(1)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        inst.cli("agent", "kill", "**")
        res = inst.cli("agent", "ls", "--json")
        if res is not None and res.returncode == 0 and not json.loads(res.stdout or "[]"):
            break
        time.sleep(1)
    # a herdr SIGKILLed restores its last save, panes orcr closed since included: the
    # reconciliation pass (every reconcile_every, 5 s here) closes those late panes
    deadline = time.monotonic() + 15
    while inst.mux.panes() and time.monotonic() < deadline:
        time.sleep(0.5)
    final = {
        "active_agents": [
            r[0] for r in inst.store("SELECT path FROM agent WHERE status != 'ended'")
        ],
        "active_runs": inst.store(
            "SELECT run_id, status FROM loop_run WHERE status IN ('pending','running','stopping')"
        ),
        "panes": [label for _, label in inst.mux.panes()],
        "task_queues": [str(tasks.root)],
        "tasks_added": list(tasks.ids),
        "agent_dirs": [str(inst.home / "agents")],
    }
    inst.cli("server", "stop")
    deadline = time.monotonic() + 30
    while inst.servers() and time.monotonic() < deadline:
        time.sleep(0.2)
    # What the server stopped gets its moment to exit; a task worker's claim guard whose
    # worker is gone exits once orcr has been unreachable for its --limit (6 s here).
    own = inst.mux.keepers()
    deadline = time.monotonic() + 10
    while True:
        time.sleep(1.0)
        left = []
        for p in inst.processes():
            try:
                if own(p):
                    continue  # the multiplexer outlives the server by design (and its keepers)
                left.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
            except psutil.Error:
                continue
        if not left or time.monotonic() > deadline:
            break
    final["processes"] = left
    final["mux_violations"] = inst.mux.violations()
    inst.mux.kill()
    for p in inst.processes():
        try:
            p.kill()
        except psutil.Error:
            pass
    log(f"wind-down: {len(final['active_agents'])} active agents, {len(left)} processes left")
    return final


def sockets(folder: str, names: list[str]) -> list[str]:
    """The sockets among ``names`` (copytree's ``ignore``: a socket cannot be copied)."""
    return [n for n in names if stat.S_ISSOCK(os.lstat(os.path.join(folder, n)).st_mode)]


def mount(home: Path, mb: int, log) -> bool:
    """``home`` on a tmpfs of ``mb`` MiB (the ``disk_full`` fault fills it): True when
    mounted; without root (or with ``mb`` 0) a plain folder and no such fault."""
    home.mkdir()
    if mb <= 0:
        return False
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mb}m,mode=0700", "tmpfs", str(home)],
        capture_output=True, text=True,
    )  # fmt: skip
    if res.returncode != 0:
        log(f"no disk_full fault: cannot mount a tmpfs ({res.stderr.strip()})")
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--fault-every", type=float, default=4.0, help="mean seconds between faults")
    ap.add_argument("--keep", action="store_true", help="keep the ORCR_HOME (printed)")
    ap.add_argument("--driver", choices=sorted(DRIVERS), default="tmux")
    ap.add_argument("--faults", help="only these fault kinds, comma-separated (default: all)")
    ap.add_argument(
        "--disk-mb", type=int, default=256, help="ORCR_HOME on a tmpfs this size (root; 0: off)"
    )
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"soak: seed {seed} ({args.seconds:.0f}s, {args.driver})", flush=True)
    t0 = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - t0:7.1f}s] {msg}", flush=True)

    base = Path(tempfile.mkdtemp(prefix="orcr-soak-", dir="/tmp"))
    home = base / "home"
    disk = mount(home, args.disk_mb, log)
    inst = Instance(home, args.driver, disk)
    stop = threading.Event()
    work = Workload(inst, seed, stop)
    tasks = Tasks(inst, seed, stop, log)
    faults = Faults(inst, random.Random(seed), log, tasks)
    report = None
    try:
        if args.faults:
            unknown = set(args.faults.split(",")) - set(faults.kinds)
            if unknown:
                raise SystemExit(f"--faults: unknown {sorted(unknown)}; known: {faults.kinds}")
            faults.kinds = [k for k in faults.kinds if k in args.faults.split(",")]
        inst.start_server()
        _soak_loops.create(inst)
        tasks.setup()
        threads = [threading.Thread(target=work.client, args=(i,)) for i in range(args.clients)]
        args_ = (inst, seed, stop, work.admitted, work.lock)
        threads.append(threading.Thread(target=_soak_loops.manual_runs, args=args_))
        threads.append(threading.Thread(target=tasks.adder))
        for t in threads:
            t.start()
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            time.sleep(
                min(faults.rng.expovariate(1 / args.fault_every), max(0, end - time.monotonic()))
            )
            if time.monotonic() < end:
                faults.inject()
        stop.set()
        for t in threads:
            t.join(120)
        final = wind_down(inst, log, tasks)
        final["typed_elsewhere"] = faults.typed
        (base / "final.json").write_text(json.dumps(final, indent=1))
        inst.log.close()
        events = soak_check.read_events(home / "store.db")
        loops = dict(inst.store("SELECT uuid, max_concurrency FROM loop"))
        caps = dict(CAPS, loops=loops, missed_after=MISSED_AFTER)
        report = soak_check.check(events, caps, final)
        states = {st: len(list((tasks.root / st).glob("*.md"))) for st in soak_check.TASK_STATES}
    finally:
        stop.set()
        inst.mux.kill()
        for p in inst.processes():
            try:
                p.kill()
            except psutil.Error:
                pass
        kept = args.keep or report is None or bool(report.violations)
        if disk:  # a home kept moves off the tmpfs, then the tmpfs goes
            if kept:
                shutil.copytree(home, base / "kept", symlinks=True, ignore=sockets)
            subprocess.run(["umount", "-l", str(home)], capture_output=True)
            if kept:
                home.rmdir()
                (base / "kept").rename(home)
    print(f"faults: {dict(sorted(faults.done.items()))}")
    print(f"admitted: {dict(sorted(work.admitted.items()))}")
    print(f"tasks added: {dict(sorted(tasks.added.items()))}; at the end: {states}")
    print(report.summary())
    for line in report.excerpt():
        print(line)
    if kept:
        print(f"ORCR_HOME kept: {home}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    print(f"soak: seed {seed}, {time.monotonic() - t0:.0f}s, violations: {len(report.violations)}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
