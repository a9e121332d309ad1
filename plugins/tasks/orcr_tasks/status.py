"""``orcr tasks status``: every number read from the files, never from memory."""

from __future__ import annotations

import time
from datetime import datetime

from orcr_tasks.queue import QUARANTINE, STATES


def _ts(value) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


def compute(queue, stale: float, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    counts = {s: 0 for s in STATES}
    oldest: dict[str, dict] = {}
    clusters: dict[str, dict] = {}
    attempts = {"total": 0, "tasks_retried": 0, "max": 0}
    stale_rows = []
    unreadable = []
    done_last_hour = 0
    landers = []  # tasks in landing/: the step their lander is at
    built = []  # what a coordinator merges: each built task's revision and branch
    backlog: dict[str, list[str]] = {}
    for state in STATES:
        for task, st, tid, why in queue.entries(state):
            counts[state] += 1
            age = now - st.st_ctime
            if state not in oldest or age > oldest[state]["age"]:
                oldest[state] = {"id": tid, "age": round(age, 1)}
            if task is None:
                unreadable.append({"file": f"{state}/{tid}.md", "why": why})
                continue
            if state == "backlog":
                backlog[tid] = task.depends_on
            n = task.attempts
            attempts["total"] += n
            attempts["tasks_retried"] += 1 if n else 0
            attempts["max"] = max(attempts["max"], n)
            c = clusters.setdefault(
                str(task.meta.get("cluster") or "-"),
                {"tasks": 0, "rejects": 0, "passes": 0, "unverifiable": 0},
            )
            c["tasks"] += 1
            c["rejects"] += task.sections("Reject")
            c["passes"] += task.sections("Pass")
            c["unverifiable"] += task.sections("Unverifiable")
            if state in ("review", "verifying", "done") and (
                task.meta.get("revision") or task.meta.get("branch")
            ):
                built.append(
                    {"id": tid, "state": state, "revision": task.meta.get("revision"),
                     "branch": task.meta.get("branch")}
                )  # fmt: skip
            if state == "done":
                at = _ts(task.meta.get("done_at"))
                if at is not None and now - at <= 3600:
                    done_last_hour += 1
            if state == "landing":
                hb = queue.read_heartbeat(tid) or {}
                landers.append(
                    {"id": tid, **{k: hb.get(k) for k in ("step", "onto", "pid", "host")}}
                )
            if state in ("doing", "verifying", "landing"):
                hb_age = queue.age(state, tid, now)
                if hb_age > stale:
                    stale_rows.append({"id": tid, "state": state, "age": round(hb_age, 1)})
    quarantined = [
        {"file": f"{QUARANTINE}/{tid}.md", "why": why or "readable now: move it back by hand"}
        for _task, _st, tid, why in queue.entries(QUARANTINE)
    ]
    for c in clusters.values():
        verdicts = c["rejects"] + c["passes"]
        c["reject_rate"] = round(c["rejects"] / verdicts, 3) if verdicts else None
    return {
        "queue": queue.label,
        "counts": counts,
        "oldest": oldest,
        "clusters": clusters,
        "attempts": attempts,
        "stale": stale_rows,
        "done_last_hour": done_last_hour,
        "lock": queue.lock_status(),
        "unreadable": unreadable,
        "quarantined": quarantined,
        "stuck": stuck(queue, backlog),
        "landing": landing(queue, backlog),
        "built": built,
        "landers": landers,
    }


def landing(queue, backlog: dict[str, list[str]]) -> list[dict]:
    """With ``dependants = landed``: backlog tasks whose dependencies are all done and
    wait to land on the base branch (a worker in the repository releases them)."""
    conf = queue.settings()
    if conf.get("dependants") != "landed":
        return []
    onto = conf.get("base") or "HEAD"
    return [
        {"id": tid, "depends_on": deps, "base": onto}
        for tid, deps in sorted(backlog.items())
        if deps and all(queue.moves.verified_in(d) for d in deps)
    ]


def stuck(queue, backlog: dict[str, list[str]]) -> list[dict]:
    """Backlog tasks that can never leave backlog/ by themselves, and why: a
    dependency in no folder (missing), in failed/ (failed dependency), a cycle,
    or a dependency that is itself stuck."""
    where = {}
    for deps in backlog.values():
        for dep in deps:
            if dep not in where:
                found = queue.where(dep)
                where[dep] = found[0] if found else None
    reasons: dict[str, str] = {}
    for tid, deps in backlog.items():
        for dep in deps:
            if where[dep] is None:
                reasons[tid] = f"depends on {dep}, which is in no folder (missing)"
                break
            if where[dep] == "failed":
                reasons[tid] = f"depends on {dep}, which is in failed/ (failed dependency)"
                break
    for tid in backlog:  # cycles among backlog tasks
        if tid in reasons:
            continue
        path, seen = [tid], {tid}
        cycle = _cycle_from(tid, backlog, path, seen)
        if cycle:
            reasons[tid] = "dependency cycle " + " -> ".join(cycle)
    changed = True
    while changed:  # waiting on a stuck task is stuck
        changed = False
        for tid, deps in backlog.items():
            if tid not in reasons:
                bad = [d for d in deps if d in reasons]
                if bad:
                    reasons[tid] = f"depends on {bad[0]}, which is stuck in backlog/"
                    changed = True
    return [{"id": tid, "why": why} for tid, why in sorted(reasons.items())]


def _cycle_from(start: str, graph: dict[str, list[str]], path: list[str], seen: set) -> list | None:
    """A dependency path from ``start`` back to ``start`` through backlog tasks."""
    for dep in graph.get(path[-1], ()):
        if dep == start:
            return [*path, start]
        if dep in graph and dep not in seen:
            seen.add(dep)
            found = _cycle_from(start, graph, [*path, dep], seen)
            if found:
                return found
    return None


def render(s: dict) -> str:
    lines = [f"queue {s['queue']}"]
    lines.append("  " + "  ".join(f"{k} {v}" for k, v in s["counts"].items()))
    lines.append(f"  done in the last hour: {s['done_last_hour']}")
    a = s["attempts"]
    lines.append(
        f"  attempts: {a['total']} failed attempts over {a['tasks_retried']} task(s), at most {a['max']}"
    )
    for state, o in s["oldest"].items():
        lines.append(f"  oldest in {state}/: {o['id']} ({o['age']:.0f}s)")
    for name, c in sorted(s["clusters"].items()):
        rate = "-" if c["reject_rate"] is None else f"{c['reject_rate']:.0%}"
        lines.append(
            f"  cluster {name}: {c['tasks']} task(s), {c['rejects']} reject(s), "
            f"{c['passes']} pass(es), {c['unverifiable']} unverifiable, reject rate {rate}"
        )
    for r in s["stale"]:
        lines.append(f"  STALE {r['state']}/{r['id']}: no heartbeat for {r['age']:.0f}s")
    if s["lock"]:
        lines.append(f"  LOCKED by {s['lock']['owner']} (alive: {s['lock']['alive']})")
    for u in s["unreadable"]:
        lines.append(f"  UNREADABLE {u['file']}: {u['why']}")
    for u in s["quarantined"]:
        lines.append(f"  QUARANTINED {u['file']}: {u['why']}")
    for r in s["stuck"]:
        lines.append(f"  STUCK backlog/{r['id']}: {r['why']}")
    for r in s.get("landing", []):
        deps = ", ".join(r["depends_on"])
        lines.append(f"  LANDING backlog/{r['id']}: waits for {deps} (done) to land on {r['base']}")
    for r in s.get("landers", []):
        lines.append(
            f"  LANDER landing/{r['id']}: {r['step'] or 'claimed'} onto {r['onto'] or '-'} "
            f"(pid {r['pid']} on {r['host']})"
        )
    for b in s.get("built", []):
        where = f"branch {b['branch']}" if b["branch"] else "no branch"
        lines.append(f"  {b['state']}/{b['id']}: revision {b['revision'] or '-'}, {where}")
    return "\n".join(lines)
