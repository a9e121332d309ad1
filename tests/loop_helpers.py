"""Shared helpers of the loop tests: a server with loops, the CLI, the store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

PY = sys.executable


def _runs(home, name):
    """``orcr loop run ls NAME --json`` (through the SDK while the server answers)."""
    return home.ask(lambda o: o.loop_run_list(name), "loop", "run", "ls", name, "--json")


def _run(home, path):
    name, run_id = path.split("/")
    return next(r for r in _runs(home, name) if r["run_id"] == run_id)


def _ended(home, path):
    r = _run(home, path)
    return r if r["status"] not in ("pending", "running", "stopping") else None


def _loop_events(home, name=None, kind=None):
    conn = sqlite3.connect(home.path / "store.db")
    try:
        rows = conn.execute(
            "SELECT e.kind, e.data FROM event e JOIN loop l ON e.loop = l.uuid "
            + ("WHERE l.name = ? " if name else "")
            + "ORDER BY e.seq",
            (name,) if name else (),
        ).fetchall()
    finally:
        conn.close()
    return [(k, json.loads(d)) for k, d in rows if kind is None or k == kind]


def _start(home, name):
    out = home.run("loop", "run", "start", name, check=True).stdout.split()
    assert len(out) == 2 and out[0].startswith(name + "/")
    return out[0]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def loops(orcr_home, short_tmp):
    orcr_home.config(
        '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nstop_grace = "1s"\n'
        "[loops]\nlog_max_bytes = 2000\nkeep_runs = 2\n"
    )
    orcr_home.start_server()
    orcr_home.work = short_tmp / "work"
    orcr_home.work.mkdir()
    return orcr_home


def _create(home, *args, env=None):
    return subprocess.run(
        [PY, "-m", "orcr_core.cli", "loop", "create", *args],
        env=dict(home.env, **(env or {})),
        cwd=home.work,
        capture_output=True,
        text=True,
        timeout=60,
    )


TRAP_TERM = "trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
IGNORE_TERM = "trap '' TERM; echo ready; exec sleep 300"


def _run_log(home, path) -> str:
    """What ``orcr loop logs NAME --run RUN_ID --source run`` prints, the run's log file:
    found through the SDK while the server answers (a poll then starts no CLI process),
    else through the CLI itself."""
    from orcr_core.sdk.client import ServerError

    name, run_id = path.split("/")
    try:
        with home.sdk() as o:
            rows = o.loop_logs(name, run=run_id, source="run")["runs"]
        logs = [Path(r["log"]) for r in rows]
        return "".join(p.read_text(errors="replace") for p in logs if p.exists())
    except (ServerError, OSError):
        return home.run("loop", "logs", name, "--run", run_id, "--source", "run").stdout


def _ready(home, path):
    return "ready" in _run_log(home, path)


def _ready_text(home, path, text):
    return text in _run_log(home, path)


def _sql(home, query, args=()):
    conn = sqlite3.connect(home.path / "store.db")
    try:
        with conn:
            return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def _run_status_in_store(home, path):
    ((status,),) = _sql(home, "SELECT status FROM loop_run WHERE run_id = ?", (path.split("/")[1],))
    return status
