"""What a queue's tasks spent: the usage of the agents the workers started.

A worker's agent is ``tasks/<queue>/<task>/<role>_<token>`` (docs/tasks.md), so a
task's cost is the usage sum (``usage.sum``) under ``tasks/<queue>/<task>``, and
each of its agents is one build attempt (``build_…``) or one verification
(``verify_…``), numbered in the order they first spent. Read from the server's
store; without a server (``tasks status`` works from the files alone) the usage
is None and shows ``-``.
"""

from __future__ import annotations

from orcr_tasks.location import agent_segment
from orcr_tasks.queue import Queue


def _sum(prefix: str) -> dict | None:
    from orcr_core.client import Client, ServerError

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


def of_queue(queue: Queue, ids: list[str]) -> dict | None:
    """``{"tokens": total, "tasks": {task id: tokens}}`` (tasks without usage absent)."""
    got = _sum(f"tasks/{queue.name}")
    if got is None:
        return None
    by_segment: dict[str, int] = {}
    for g in got["groups"]:
        parts = g["key"].split("/")
        if len(parts) >= 3:
            by_segment[parts[2]] = by_segment.get(parts[2], 0) + g["tokens"]
    tasks = {tid: by_segment[agent_segment(tid)] for tid in ids if agent_segment(tid) in by_segment}
    return {"tokens": got["total"]["tokens"], "tasks": tasks}


def of_task(queue: Queue, tid: str) -> dict | None:
    """``{"tokens", "input", "output", "cache_read", "cache_write", "agents": [{path,
    role, n, tokens, …}]}``: the task's total and each attempt (build) or verification."""
    got = _sum(f"tasks/{queue.name}/{agent_segment(tid)}")
    if got is None:
        return None
    agents, seen = [], {}
    for g in sorted(got["groups"], key=lambda g: (g.get("first") or 0, g["key"])):
        role = g["key"].rsplit("/", 1)[-1].split("_", 1)[0]
        seen[role] = seen.get(role, 0) + 1
        fields = ("input", "output", "cache_read", "cache_write", "tokens", "turns")
        agents.append({"path": g["key"], "role": role, "n": seen[role]} | {f: g[f] for f in fields})
    total = got["total"]
    return {f: total[f] for f in ("input", "output", "cache_read", "cache_write", "tokens")} | {
        "agents": agents
    }


def task_lines(u: dict | None) -> list[str]:
    if u is None:
        return ["usage: - (no orcr server answers)"]
    lines = [f"usage: {_tokens(u['tokens'])} tokens"]
    for a in u["agents"]:
        what = "attempt" if a["role"] == "build" else "verification"
        lines.append(f"  {what} {a['n']}: {_tokens(a['tokens'])} tokens ({a['path']})")
    return lines


def queue_lines(u: dict | None, top: int = 5) -> list[str]:
    if u is None:
        return ["  usage: - (no orcr server answers)"]
    costly = sorted(u["tasks"].items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    most = ", ".join(f"{tid} {_tokens(n)}" for tid, n in costly)
    return [f"  usage: {_tokens(u['tokens'])} tokens" + (f"; most: {most}" if most else "")]
