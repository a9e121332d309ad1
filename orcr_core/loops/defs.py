"""Loop definitions: create, pause, resolve, end, and their JSON shape (resume and
remove, which reach into fires and runs, are in :mod:`orcr_core.loops.control`).

Every change is one ``BEGIN IMMEDIATE`` transaction with its event row. A loop
name is one path segment, unique among loops that have not ended (a partial
unique index); each definition has its own uuid, so the histories of
same-named definitions never mix.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid as uuidlib
from datetime import datetime

from peewee import SQL, IntegrityError

from orcr_core import paths
from orcr_core.common.times import iso
from orcr_core.loops import cadence
from orcr_core.store import events
from orcr_core.store.models import RUN_ACTIVE, Loop, LoopRun, db

OVERLAP = ("queue", "skip")
MAX_CONCURRENCY = 1000


class LoopError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


NAME_RULE = (
    "a loop name is one segment of lowercase letters, digits and _ "
    f"(at most {paths.MAX_SEGMENT} characters), e.g. nightly; it becomes the loop's level-1 path"
)


def validate_name(name) -> str:
    if (
        not isinstance(name, str)
        or not paths.SEGMENT.fullmatch(name)
        or len(name) > paths.MAX_SEGMENT
    ):
        raise LoopError("invalid_name", f"loop name {name!r}: {NAME_RULE}")
    return name


#: set by orcr itself in a run (never taken from the server or --env)
RESERVED_ENV = (
    "ORCR_PATH",
    "ORCR_SOCKET",
    "ORCR_ID",
    "ORCR_LAUNCH_TOKEN",
    "ORCR_FAULT",
    "ORCR_SERVER_TREE",
)


def validate_env(env, path_env) -> dict:
    """The run environment a loop adds to the server's: the creating shell's
    ``PATH`` (``path_env``) and ``--env KEY=VALUE`` pairs (``env``)."""
    out: dict[str, str] = {}
    if path_env is not None:
        if not isinstance(path_env, str) or "\0" in path_env:
            raise LoopError("invalid_params", "path_env must be a string (the PATH to record)")
        out["PATH"] = path_env
    if env is None:
        return out
    if not isinstance(env, dict):
        raise LoopError("invalid_params", "env is an object of KEY: VALUE strings")
    for key, value in env.items():
        if (
            not isinstance(key, str)
            or not key
            or "=" in key
            or "\0" in key
            or not isinstance(value, str)
            or "\0" in value
        ):
            raise LoopError(
                "invalid_env",
                f"--env {key!r}: give KEY=VALUE, a name without '=' and values without NUL",
            )
        if key in RESERVED_ENV:
            raise LoopError(
                "invalid_env",
                f"--env {key}: orcr sets it in every run; reserved: {', '.join(RESERVED_ENV)}",
            )
        out[key] = value
    return out


def check_command(cmd: str, cwd: str, path_env: str | None) -> None:
    """An unknown command is refused at create, not at 3 a.m.: a bare name must be
    on the recorded ``PATH`` (else the server's), a path (relative to the loop's
    cwd) must be an executable file."""
    if "/" not in cmd:
        if shutil.which(cmd, path=path_env) is None:
            raise LoopError(
                "invalid_command",
                f"command {cmd!r} not found on PATH; give a path to it (./script.sh, /usr/bin/x)",
            )
        return
    full = os.path.join(cwd, cmd)
    if not os.path.isfile(full):
        raise LoopError(
            "invalid_command",
            f"command {cmd!r} not found ({full} is not a file; a relative path is "
            f"taken from the loop's directory {cwd})",
        )
    if not os.access(full, os.X_OK):
        raise LoopError("invalid_command", f"command {cmd!r} is not executable (chmod +x {full})")


def create(params: dict, now: float | None = None) -> Loop:
    """Validate everything first, then insert the loop row and its event."""
    now = time.time() if now is None else now
    name = validate_name(params.get("name"))
    cron, once = params.get("cron"), params.get("once_at")
    if (cron is None) == (once is None):
        raise LoopError("invalid_params", "give a cron expression or --once-at, not both")
    tz = params.get("tz") or "UTC"
    try:
        cadence.zone(tz)
        if cron is not None:
            if not isinstance(cron, str):
                raise LoopError("invalid_params", "cron must be a string")
            cron = cadence.validate_cron(cron)
            next_fire = cadence.next_fire(cron, tz, now)
            if next_fire is None:
                raise LoopError("invalid_cadence", f"{cron!r} never fires (within 5 years)")
            once_at = None
        else:
            if isinstance(once, bool) or not isinstance(once, int | float | str):
                raise LoopError("invalid_params", "once_at is a time string or UTC seconds")
            once_at = (
                float(once) if not isinstance(once, str) else cadence.parse_when(once, tz, now)
            )
            if once_at <= now:
                raise LoopError(
                    "invalid_cadence", f"--once-at {iso(once_at)} is in the past; pick a later time"
                )
            next_fire = once_at
    except cadence.CadenceError as exc:
        raise LoopError("invalid_cadence", str(exc)) from None
    argv = params.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise LoopError("invalid_params", "argv (after --) must be a non-empty list of strings")
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise LoopError("invalid_cwd", f"cwd {cwd!r} is not an existing absolute directory")
    env = validate_env(params.get("env"), params.get("path_env"))
    check_command(argv[0], cwd, env.get("PATH"))
    overlap = params.get("overlap") or "queue"
    if overlap not in OVERLAP:
        raise LoopError("invalid_params", f"overlap {overlap!r}: use queue or skip")
    maxc = params.get("max_concurrency", 1)
    if isinstance(maxc, bool) or not isinstance(maxc, int) or not 1 <= maxc <= MAX_CONCURRENCY:
        raise LoopError(
            "invalid_params", f"max_concurrency {maxc!r}: use a whole number 1-{MAX_CONCURRENCY}"
        )
    keep_agents = params.get("keep_agents", False)
    if not isinstance(keep_agents, bool):
        raise LoopError("invalid_params", "keep_agents must be true or false")
    timeout = params.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise LoopError("invalid_params", "timeout must be a number of seconds > 0")
    try:
        with db.atomic("IMMEDIATE"):
            loop = Loop.create(
                uuid=str(uuidlib.uuid4()),
                name=name,
                status="active",
                cron=cron,
                once_at=once_at,
                tz=tz,
                argv=json.dumps(argv),
                cwd=cwd,
                overlap=overlap,
                max_concurrency=maxc,
                timeout=timeout,
                keep_agents=keep_agents,
                env=json.dumps(env) if env else None,
                next_fire_at=next_fire,
                created_at=now,
            )
            events.emit(
                "loop.created",
                loop=loop.uuid,
                name=name,
                cron=cron,
                tz=tz,
                once_at=iso(once_at),
                next_fire_at=iso(next_fire),
            )
    except IntegrityError:
        raise LoopError(
            "name_in_use",
            f"a loop named {name!r} exists already; remove it (orcr loop rm {name}) or pick another name",
        ) from None
    return loop


def resolve(target: str) -> Loop:
    """By uuid, or by name: the active (or paused) definition first, else the newest ended one."""
    row = Loop.get_or_none(Loop.uuid == target)
    if row is None:
        row = (
            Loop.select()
            .where(Loop.name == target)
            .order_by((Loop.status == "ended").asc(), Loop.created_at.desc(), SQL("rowid DESC"))
            .first()
        )
    if row is None:
        raise LoopError("not_found", f"no loop {target!r} (orcr loop ls --all)")
    return row


def pause(loop: Loop) -> Loop:
    with db.atomic("IMMEDIATE"):
        loop = Loop.get_by_id(loop.uuid)
        if loop.status != "active":
            raise LoopError(
                "not_active", f"loop {loop.name} is {loop.status}; only an active loop pauses"
            )
        Loop.update(status="paused", next_fire_at=None).where(Loop.uuid == loop.uuid).execute()
        events.emit("loop.paused", loop=loop.uuid, name=loop.name)
    return Loop.get_by_id(loop.uuid)


def end(loop: Loop, reason: str, now: float, *, ts: float | None = None) -> None:
    """Inside a transaction: the loop ends and releases its name (``ts`` stamps its
    event, else the clock at the write)."""
    Loop.update(status="ended", end_reason=reason, ended_at=now, next_fire_at=None).where(
        Loop.uuid == loop.uuid
    ).execute()
    events.emit("loop.ended", loop=loop.uuid, name=loop.name, reason=reason, ts=ts)


def missed_text(record: dict | None, tz: str) -> str | None:
    """Why fires were missed, for a person: "server down 02:00–07:12" in the
    loop's zone (with dates when the interval spans days)."""
    if not record:
        return None
    reason = record.get("reason")
    start, end = record.get("from"), record.get("to")

    def local(stamp: str, with_date: bool) -> str:
        dt = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(cadence.zone(tz))
        return dt.strftime("%Y-%m-%d %H:%M" if with_date else "%H:%M")

    if reason in ("server_down", "asleep") and end:
        what = "server down" if reason == "server_down" else "machine asleep"
        if not start:
            return f"{what} until {local(end, True)}"
        a = datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(cadence.zone(tz))
        b = datetime.fromisoformat(end.replace("Z", "+00:00")).astimezone(cadence.zone(tz))
        days = a.date() != b.date()
        return f"{what} {local(start, days)}–{local(end, days)}"
    if reason == "paused":
        return "the loop was paused at its time"
    return f"the scheduler reached it {record.get('late_by', 0):.0f}s late"


def run_dict(run: LoopRun, name: str) -> dict:
    return {
        "uuid": run.uuid,
        "run_id": run.run_id,
        "path": f"{name}/{run.run_id}",
        "loop": run.loop,
        "kind": run.kind,
        "status": run.status,
        "due_at": iso(run.due_at),
        "fires": run.fires,
        "pid": run.pid,
        "pgid": run.pgid,
        "exit_code": run.exit_code,
        "error": run.error,
        "created_at": iso(run.created_at),
        "started_at": iso(run.started_at),
        "ended_at": iso(run.ended_at),
    }


_LAST_RUNS = (
    "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY loop ORDER BY created_at DESC) "
    "AS n FROM loop_run WHERE status != 'pending'{where}) WHERE n = 1"
)
_COUNTS = (
    "SELECT loop, status, COUNT(*) FROM loop_run WHERE status IN "
    "('pending', 'running', 'stopping'){where} GROUP BY loop, status"
)


def loop_dicts(loops: list[Loop]) -> list[dict]:
    """Many loops with their counts and last runs: two queries for all of them."""
    if not loops:
        return []
    where, args = "", ()
    if len(loops) == 1:
        where, args = " AND loop = ?", (loops[0].uuid,)
    last = {r.loop: r for r in LoopRun.raw(_LAST_RUNS.format(where=where), *args)}
    counts: dict[str, dict[str, int]] = {}
    for loop_uuid, status, n in db.execute_sql(_COUNTS.format(where=where), args).fetchall():
        counts.setdefault(loop_uuid, {})[status] = n
    return [_loop_dict(lp, last.get(lp.uuid), counts.get(lp.uuid, {})) for lp in loops]


def loop_dict(loop: Loop) -> dict:
    return loop_dicts([loop])[0]


def _last_missed(loop: Loop) -> dict | None:
    if not loop.last_missed:
        return None
    record = json.loads(loop.last_missed)
    return dict(record, why=missed_text(record, loop.tz))


def _loop_dict(loop: Loop, last: LoopRun | None, counts: dict[str, int]) -> dict:
    nxt = loop.next_fire_at
    return {
        "uuid": loop.uuid,
        "name": loop.name,
        "status": loop.status,
        "cron": loop.cron,
        "once_at": iso(loop.once_at),
        "tz": loop.tz,
        "argv": json.loads(loop.argv),
        "cwd": loop.cwd,
        "overlap": loop.overlap,
        "max_concurrency": loop.max_concurrency,
        "timeout": loop.timeout,
        "keep_agents": bool(loop.keep_agents),
        "env": {k: v for k, v in json.loads(loop.env or "{}").items() if k != "PATH"},
        "path_env": json.loads(loop.env or "{}").get("PATH"),
        "next_fire_at": iso(nxt),
        "next_fire_local": cadence.iso_local(nxt, loop.tz) if nxt is not None else None,
        "created_at": iso(loop.created_at),
        "ended_at": iso(loop.ended_at),
        "end_reason": loop.end_reason,
        "running": sum(counts.get(s, 0) for s in RUN_ACTIVE),
        "pending": counts.get("pending", 0),
        "last_run": run_dict(last, loop.name) if last else None,
        "last_missed": _last_missed(loop),
    }
