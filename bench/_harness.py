"""Shared pieces of the benchmarks: a private orcr server and what measures it.

:func:`bench_server` is a private server on the in-repo test driver
(testing/orcr_testing/plugins/orcr_test_driver.py), which starts no processes, so the figures
measure orcr itself: the CLI, the socket, admission and promotion. The benches
that need a real multiplexer (idle, discovery) write their own ``config.toml``
and use :func:`start_server`, :func:`idle_window` and :func:`stop_server`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the test distribution (testing/: the herdr emulator the herdr benches and the soak
# run), importable from the checkout whether or not it is installed
sys.path.append(str(ROOT / "testing"))
#: where benchmark stores live; ORCR_BENCH_DIR=/dev/shm takes the disk out of the figures
BENCH_DIR = os.environ.get("ORCR_BENCH_DIR", "/tmp")
TICK = os.sysconf("SC_CLK_TCK")
#: variables of the caller's environment that would point a bench server elsewhere
FOREIGN = ("ORCR_PATH", "ORCR_SOCKET", "TMUX", "HERDR_SOCKET_PATH")


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


# `timeout 500 python bench/idle.py` ends a bench with SIGTERM: as SystemExit, its
# ``finally`` blocks still stop the servers and multiplexers it started (by default the
# process died on the spot and left a whole fleet running, 100 agents a run).
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def bench_env(home: Path, **extra: str) -> dict[str, str]:
    """This environment with ``ORCR_HOME=home`` and ``extra``, without :data:`FOREIGN`."""
    env = dict(os.environ, ORCR_HOME=str(home), **extra)
    for var in FOREIGN:
        env.pop(var, None)
    return env


def start_server(env: dict[str, str], log=subprocess.DEVNULL, timeout: float = 30.0):
    """Start ``orcr_core.server`` in its own session and wait until its socket answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.server"],
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    sock = str(Path(env["ORCR_HOME"]) / "run" / "orcr.sock")
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sock)
            return proc
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
        finally:
            s.close()


def stop_server(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def orcr(env: dict[str, str], *args: str) -> str:
    """Run the orcr CLI against the server of ``env``; its stdout."""
    return subprocess.run(
        [sys.executable, "-m", "orcr_core.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def server_status(env: dict[str, str]) -> dict:
    return json.loads(orcr(env, "server", "status", "--json"))


def until(fn, timeout: float = 30.0, interval: float = 0.02):
    """Poll ``fn`` until it returns something truthy (returned), else TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not reached")


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used (utime + stime, every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def idle_window(proc: subprocess.Popen, env: dict[str, str], window: float) -> dict:
    """What the server costs while nothing is asked of it: after 2 s for the start to
    settle, its CPU (a percentage of one core) and the store write transactions it
    began per second over ``window`` seconds."""
    time.sleep(2.0)  # let the start settle before the window opens
    pid = proc.pid
    w0, c0, t0 = server_status(env)["write_transactions"], cpu_seconds(pid), time.monotonic()
    time.sleep(window)  # the measurement window: nothing changes anywhere
    c1, t1 = cpu_seconds(pid), time.monotonic()
    w1 = server_status(env)["write_transactions"]
    return {"cpu_pct": 100.0 * (c1 - c0) / (t1 - t0), "writes_per_s": (w1 - w0) / (t1 - t0)}


def _spin() -> None:  # pragma: no cover - runs in the hog processes
    while True:
        pass


@contextmanager
def cpu_load(procs: int | None = None):
    """Busy processes on every core (``procs``, default one per CPU) while the block
    runs: a machine at 100% CPU, as when many agents' tools compile at once."""
    import multiprocessing

    hogs = [
        multiprocessing.Process(target=_spin, daemon=True) for _ in range(procs or os.cpu_count())
    ]
    for h in hogs:
        h.start()
    try:
        time.sleep(0.5)  # let the scheduler spread them
        yield len(hogs)
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.join()


@contextmanager
def bench_server(config: str = "", where: str = BENCH_DIR):
    home = Path(tempfile.mkdtemp(prefix="orcr-bench-", dir=where))
    (home / "config.toml").write_text('[driver]\nname = "test"\n' + config)
    env = dict(
        os.environ,
        ORCR_HOME=str(home),
        ORCR_PLUGIN_MODULES="orcr_test_driver",
        PYTHONPATH=str(ROOT / "testing" / "orcr_testing" / "plugins"),
    )
    env.pop("ORCR_PATH", None)
    proc = start_server(env, timeout=15)
    try:
        yield home, env
    finally:
        stop_server(proc, timeout=10)
        shutil.rmtree(home, ignore_errors=True)
