"""Runs: allocation, start, exit, the stop/timeout path, the stopping barrier, logs.

Statuses: ``pending → running → ok | failed``, ``running → stopping → stopped |
timeout``, ``pending → canceled``. A run is a durable row from the moment it is
asked for. Its command runs under a supervisor (:mod:`orcr_core.loops.supervisor`)
that records the exit status in ``<run_id>.state`` whatever happens to the
server; the server turns that file into the row's final status.

The identity guard: a pgid alone proves nothing (pids are reused), so a run's
process group is signalled only while the process that leads it has the start
time recorded when it was launched. Otherwise the run is closed as dead and
nothing is signalled.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import uuid as uuidlib
from pathlib import Path

import psutil

from orcr_core import dirs
from orcr_core.common.times import iso
from orcr_core.store import events
from orcr_core.store.models import RUN_ACTIVE, RUN_ENDED, Loop, LoopRun, db

RUN_ID = re.compile(r"r[a-z0-9]{5}")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
#: how close a live process's start time must be to the recorded one (seconds):
#: both are boot time + start ticks, and boot time is only known to the second
START_TOLERANCE = 1.0


def loops_dir() -> Path:
    return dirs.data_dir() / "loops"


def alive_path() -> Path:
    """Touched at every scheduler wake-up (at least once a minute) and at a clean
    stop: after a restart its mtime says when the server was last seen running,
    so a missed fire says "server down 02:00–07:12"."""
    return loops_dir() / "alive"


def mark_alive() -> None:
    path = alive_path()
    try:
        path.touch()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.touch()
    except OSError:
        pass  # a full disk: the interval is only less precise


def last_alive() -> float | None:
    try:
        return alive_path().stat().st_mtime
    except OSError:
        return None


def run_dir(loop_uuid: str) -> Path:
    """``loops/<loop uuid>/runs``: by definition uuid, so same-named loops never mix."""
    return loops_dir() / loop_uuid / "runs"


def log_path(loop_uuid: str, run_id: str) -> Path:
    return run_dir(loop_uuid) / f"{run_id}.log"


def state_path(loop_uuid: str, run_id: str) -> Path:
    return run_dir(loop_uuid) / f"{run_id}.state"


def read_state(loop_uuid: str, run_id: str) -> dict | None:
    try:
        return json.loads(state_path(loop_uuid, run_id).read_text())
    except (OSError, ValueError):
        return None


def new_run_id(loop: Loop) -> str:
    """``r`` + 5 lowercase alphanumerics, unique among the runs of every loop of
    this name (so a path ``<loop>/<run_id>`` never means two runs)."""
    while True:
        rid = "r" + "".join(secrets.choice(_ALPHABET) for _ in range(5))
        taken = db.execute_sql(
            "SELECT 1 FROM loop_run r JOIN loop l ON r.loop = l.uuid "
            "WHERE l.name = ? AND r.run_id = ? LIMIT 1",
            (loop.name, rid),
        ).fetchone()
        if not taken:
            return rid


def allocate(
    loop: Loop, kind: str, due_at: float, now: float, *, ts: float | None = None
) -> LoopRun:
    """Inside a transaction: a pending run row (``ts`` stamps its event, else the
    clock at the write)."""
    run = LoopRun.create(
        uuid=str(uuidlib.uuid4()),
        loop=loop.uuid,
        run_id=new_run_id(loop),
        kind=kind,
        status="pending",
        due_at=due_at,
        created_at=now,
        fires=1,
    )
    events.emit(
        "run.status",
        loop=loop.uuid,
        run=run.uuid,
        run_id=run.run_id,
        run_kind=kind,
        due_at=iso(due_at),
        ts=ts,
        **{"from": None, "to": "pending"},
    )
    return run


def set_status(
    run: LoopRun,
    to: str,
    now: float,
    note: dict | None = None,
    *,
    ts: float | None = None,
    **fields,
) -> None:
    """Inside a transaction: one status change and its event row (``note`` goes
    into the event only; ``ts`` stamps it, else the clock at the write)."""
    if to in RUN_ENDED:
        fields.setdefault("ended_at", now)
    LoopRun.update(status=to, **fields).where(LoopRun.uuid == run.uuid).execute()
    data = {k: v for k, v in fields.items() if k in ("exit_code", "error", "stop_reason")}
    events.emit(
        "run.status",
        loop=run.loop,
        run=run.uuid,
        run_id=run.run_id,
        **{"from": run.status, "to": to},
        ts=ts,
        **data,
        **(note or {}),
    )
    run.status = to


def take_pending(loop_uuid: str, now: float) -> list[LoopRun]:
    """One transaction: move the oldest pending runs to running while the loop's
    max-concurrency has room. A paused loop holds its pending runs."""
    with db.atomic("IMMEDIATE"):
        loop = Loop.get_or_none(Loop.uuid == loop_uuid)
        if loop is None or loop.status == "paused":
            return []
        active = (
            LoopRun.select()
            .where((LoopRun.loop == loop_uuid) & LoopRun.status.in_(RUN_ACTIVE))
            .count()
        )
        free = loop.max_concurrency - active
        if free <= 0:
            return []
        pending = list(
            LoopRun.select()
            .where((LoopRun.loop == loop_uuid) & (LoopRun.status == "pending"))
            .order_by(LoopRun.created_at, LoopRun.due_at)
            .limit(free)
        )
        for run in pending:
            set_status(run, "running", now, started_at=now)
        return pending


def child_env(loop: Loop, run: LoopRun, socket_path: Path) -> dict:
    """The server's environment without orcr's own identity variables (the
    server's ``ORCR_ID``, ``ORCR_LAUNCH_TOKEN``, ...), then the loop's recorded
    ``PATH`` and ``--env`` pairs, then the run's own ``ORCR_PATH`` and
    ``ORCR_SOCKET``."""
    from orcr_core.loops.defs import RESERVED_ENV

    env = {k: v for k, v in os.environ.items() if k not in RESERVED_ENV}
    env.update(json.loads(loop.env or "{}"))
    env["ORCR_PATH"] = f"{loop.name}/{run.run_id}"
    env["ORCR_SOCKET"] = str(socket_path)  # its agents reach this server
    return env


def final_status(exit_code: int | None) -> str:
    return "ok" if exit_code == 0 else "failed"


def record_exit(run_uuid: str, state: dict | None, now: float) -> LoopRun | None:
    """One transaction: a running run whose supervisor has exited gets its final
    status from the state file. A stopping run only keeps the exit code: the stop
    path finishes it (after its barrier glob-kill)."""
    with db.atomic("IMMEDIATE"):
        run = LoopRun.get_or_none(LoopRun.uuid == run_uuid)
        if run is None or run.status not in RUN_ACTIVE:
            return None
        code = (state or {}).get("exit_code")
        if code is None:
            error = "the supervisor ended without recording an exit status"
        else:
            error = (state or {}).get("error")
        if run.status == "stopping":
            LoopRun.update(exit_code=code).where(LoopRun.uuid == run.uuid).execute()
            return run
        fields = {"exit_code": code, "ended_at": (state or {}).get("ended_at") or now}
        if error:
            fields["error"] = error
        set_status(run, final_status(code), now, **fields)
        return run


def identity_ok(pid: int | None, start: float | None, running: bool = False) -> bool:
    """Does ``pid`` still name the process started at ``start``? A zombie still
    holds its pid (and pgid), so it passes unless ``running`` asks for a live one."""
    if not pid or start is None:
        return False
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - start) > START_TOLERANCE:
            return False
        return not running or proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def process_of(run: LoopRun) -> tuple[int | None, int | None, float | None]:
    """(pid, pgid, start) from the row, else from the supervisor's state file."""
    if run.pid:
        return run.pid, run.pgid, run.proc_start
    loop = Loop.get_by_id(run.loop)
    st = read_state(loop.uuid, run.run_id) or {}
    return st.get("pid"), st.get("pgid"), st.get("start")


SIGNAMES = {15: "TERM", 9: "KILL"}


def signal_group(run: LoopRun, sig: int, why: str | None = None) -> bool:
    """Signal the run's process group if, and only if, the identity guard passes.

    Seed 002's intent/applied pair: ``run.signal_requested`` is committed before
    the OS call, ``run.signal_applied`` after it with what was observed
    (``delivered``: false when the group was gone by then). Never call it inside
    a transaction: the intent must be on disk before the signal.
    """
    pid, pgid, start = process_of(run)
    if not identity_ok(pid, start):
        return False
    name = SIGNAMES.get(sig, str(sig))
    ids = dict(loop=run.loop, run=run.uuid, run_id=run.run_id, signal=name)
    with db.atomic("IMMEDIATE"):
        events.emit(
            "run.signal_requested", pgid=pgid or pid, **ids, **({"why": why} if why else {})
        )
    try:
        os.killpg(pgid or pid, sig)
        delivered = True
    except ProcessLookupError:
        delivered = False
    with db.atomic("IMMEDIATE"):
        events.emit("run.signal_applied", delivered=delivered, **ids)
    return delivered


def admission_refusal(path: str, scope: str | None) -> tuple[str, str] | None:
    """Inside admission's transaction (the same ``BEGIN IMMEDIATE`` as the insert):
    why an agent at ``path`` must be refused, as ``(code, message)``, else None.

    * the barrier: a path under ``<loop>/<run_id>`` of a run that is not running
      (stopping, or ended by any path) is refused ``run_stopping``;
    * the reserved level 1: a path whose first segment is the name of a loop that
      has not ended, or under a running run, is refused ``reserved_path`` unless
      the caller's scope (``ORCR_PATH``) is inside that run.

    One indexed query for paths that look like ``<name>/r?????/...``, one more for
    a loop name otherwise.
    """
    segs = path.split("/")
    name = segs[0]
    if len(segs) >= 2 and RUN_ID.fullmatch(segs[1]):
        row = db.execute_sql(
            "SELECT r.status FROM loop_run r JOIN loop l ON r.loop = l.uuid "
            "WHERE l.name = ? AND r.run_id = ? LIMIT 1",
            (name, segs[1]),
        ).fetchone()
        if row is not None:
            run_path = f"{name}/{segs[1]}"
            if row[0] != "running":
                return (
                    "run_stopping",
                    f"run {run_path} is {row[0]}: no new agents under its path "
                    "(the loop run stop barrier; a run's agents end with it)",
                )
            if scope == run_path or (scope or "").startswith(run_path + "/"):
                return None
            return (
                "reserved_path",
                f"{path!r} is under the loop run {run_path}: only that run's command "
                f"(ORCR_PATH={run_path}) and its agents start agents there",
            )
    active = db.execute_sql(
        "SELECT 1 FROM loop WHERE name = ? AND status != 'ended' LIMIT 1", (name,)
    ).fetchone()
    if active:
        return (
            "reserved_path",
            f"{name!r} is the loop {name}'s level-1 path: agents under it are started by "
            f"its runs only (ORCR_PATH={name}/<run_id>); pick another first segment",
        )
    return None


def prune_logs(loop_uuid: str, keep: int) -> list[str]:
    """Delete the log and state files of all but the newest ``keep`` ended runs."""
    rows = list(
        LoopRun.select(LoopRun.run_id)
        .where((LoopRun.loop == loop_uuid) & LoopRun.status.in_(RUN_ENDED))
        .order_by(LoopRun.created_at.desc())
        .offset(keep)
    )
    removed = []
    for r in rows:
        for p in (log_path(loop_uuid, r.run_id), state_path(loop_uuid, r.run_id)):
            try:
                p.unlink()
                if p.suffix == ".log":
                    removed.append(r.run_id)
            except FileNotFoundError:
                pass
    return removed
