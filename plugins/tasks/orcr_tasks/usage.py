"""What a queue's tasks spent: the usage of the agents the workers started.

A worker's agent is ``tasks/<queue>/<task>/<role>_<token>`` (docs/tasks.md), and
each of a task's agents is one build attempt (``build_…``) or one verification
(``verify_…``), numbered in the order they first spent. Two sources, merged by
agent path: the records in the queue itself (orcr_tasks.spent: every host's
agents, written when each ended) and this host's orcr server (``usage.sum``
under ``tasks/<queue>/<task>``: fresher for its own agents, and the only source
for one still working). Usage is None (``-``) only when neither has anything.
"""

from __future__ import annotations

import socket

from orcr_tasks.location import agent_segment
from orcr_tasks.queue import Queue
from orcr_tasks.spent import FIELDS


def _sum(prefix: str) -> dict | None:
    from orcr_core.sdk.client import Client, ServerError

    try:
        client = Client(autostart=False)
        try:
            return client.call("usage.sum", prefix=prefix, by="path")
        finally:
            client.close()
    except (ServerError, OSError):
        return None


def _tokens(n: int | None) -> str:
    if n is None:
        return "-"
    return str(n) if n < 10_000 else f"{n / 1000:.1f}k" if n < 1_000_000 else f"{n / 1e6:.1f}M"


def _merged(queue: Queue, task_id: str | None) -> list[dict] | None:
    """Every agent's spend (``path``, the fields, ``first``, ``host``): the queue's
    records, this host's server's numbers over them; None when neither has any."""
    prefix = f"tasks/{queue.name}" + (f"/{agent_segment(task_id)}" if task_id else "")
    try:
        records = queue.spent(task_id)
    except Exception:  # a queue that cannot be read now: the server's numbers stand
        records = []
    local = _sum(prefix)
    if local is None and not records:
        return None
    by_path = {r["path"]: r for r in records}
    for g in (local or {}).get("groups", ()):
        by_path[g["key"]] = dict(by_path.get(g["key"], {}), path=g["key"], first=g.get("first"))
        by_path[g["key"]].update({f: g[f] for f in FIELDS})
        by_path[g["key"]].setdefault("host", socket.gethostname())
    return list(by_path.values())


def of_queue(queue: Queue, ids: list[str]) -> dict | None:
    """``{"tokens": total, "tasks": {task id: tokens}}`` (tasks without usage absent)."""
    got = _merged(queue, None)
    if got is None:
        return None
    by_segment: dict[str, int] = {}
    for a in got:
        parts = a["path"].split("/")
        if len(parts) >= 3:
            by_segment[parts[2]] = by_segment.get(parts[2], 0) + a["tokens"]
    tasks = {tid: by_segment[agent_segment(tid)] for tid in ids if agent_segment(tid) in by_segment}
    return {"tokens": sum(a["tokens"] for a in got), "tasks": tasks}


def of_task(queue: Queue, tid: str) -> dict | None:
    """``{"tokens", "input", "output", "cache_read", "cache_write", "agents": [{path,
    role, n, host, tokens, …}]}``: the task's total and each attempt (build) or
    verification, from every host."""
    got = _merged(queue, tid)
    if got is None:
        return None
    agents, seen = [], {}
    for a in sorted(got, key=lambda a: (a.get("first") or 0, a["path"])):
        role = a["path"].rsplit("/", 1)[-1].split("_", 1)[0]
        seen[role] = seen.get(role, 0) + 1
        agents.append(
            {"path": a["path"], "role": role, "n": seen[role], "host": a.get("host")}
            | {f: a[f] for f in FIELDS}
        )
    total = {f: sum(a[f] for a in agents) for f in ("input", "output", "cache_read",
                                                  "cache_write", "tokens")}  # fmt: skip
    return total | {"agents": agents}


def task_lines(u: dict | None) -> list[str]:
    if u is None:
        return ["usage: - (no orcr server answers)"]
    lines = [f"usage: {_tokens(u['tokens'])} tokens"]
    for a in u["agents"]:
        what = "attempt" if a["role"] == "build" else "verification"
        on = f" on {a['host']}" if a.get("host") else ""
        lines.append(f"  {what} {a['n']}: {_tokens(a['tokens'])} tokens ({a['path']}{on})")
    return lines


def queue_lines(u: dict | None, top: int = 5) -> list[str]:
    if u is None:
        return ["  usage: - (no orcr server answers)"]
    costly = sorted(u["tasks"].items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    most = ", ".join(f"{tid} {_tokens(n)}" for tid, n in costly)
    return [f"  usage: {_tokens(u['tokens'])} tokens" + (f"; most: {most}" if most else "")]
