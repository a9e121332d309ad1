"""Each agent's tokens, kept in the queue itself (issue 33 item 4).

An orcr server knows the usage of the agents it ran only; on a queue several
hosts share, a task's attempts run under several servers. So whoever ends a
worker's agent (the worker, or the claim guard of its host: orcr_tasks.guard)
writes what the agent spent into the queue, one record per agent, and
``tasks status``/``show`` read the records of every host (orcr_tasks.usage).

One record per agent, one writer each (the same numbers whoever writes them):
on the file queue ``usage/<task>/<role>_<token>.json`` (written whole: temp file
and rename), on PostgreSQL a row of ``orcr_task_usage``. A record is
``{path, uuid, role, host, orcr, input, output, cache_read, cache_write,
tokens, turns, first}`` (``first``: when the agent's first turn ended).
"""

from __future__ import annotations

import json
from pathlib import Path

from orcr_tasks.files import write_atomic
from orcr_tasks.location import whereabouts

FIELDS = ("input", "output", "cache_read", "cache_write", "tokens", "turns")


def entry(agent: dict, here: dict) -> dict | None:
    """The record of an agent as ``orcr.get`` returns it; None when it spent nothing."""
    u = agent.get("usage")
    if not u:
        return None
    ended = [t["ended_at"] for t in agent.get("usage_turns") or [] if t.get("ended_at")]
    return {
        "path": agent["path"],
        "uuid": agent["uuid"],
        "role": agent["path"].rsplit("/", 1)[-1].split("_", 1)[0],
        "host": here.get("host"),
        "orcr": here.get("orcr"),
        **{f: int(u.get(f) or 0) for f in FIELDS},
        "first": min(ended) if ended else None,
    }


def record(queue, orcr, task_id: str, uuid: str, say=None) -> dict | None:
    """Write what the agent ``uuid`` (ended) spent into the queue; never raises: a
    record that cannot be written is said, and that agent's tokens are counted only
    by its own host's server."""
    try:
        e = entry(orcr.get(uuid), whereabouts())
        if e is not None:
            queue.record_usage(task_id, e)
        return e
    except Exception as exc:
        if say is not None:
            say(f"{task_id}: its agent's tokens were not written to the queue: {exc}")
        return None


# -- the file queue's records ------------------------------------------------------------


def write_file(root: Path, task_id: str, e: dict) -> None:
    d = root / "usage" / task_id
    d.mkdir(parents=True, exist_ok=True)
    write_atomic(d / f"{e['path'].rsplit('/', 1)[-1]}.json", json.dumps(e) + "\n")


def read_files(root: Path, task_id: str | None = None) -> list[dict]:
    """Every record (of one task, or of all), each with its ``task``."""
    base = root / "usage"
    dirs = [base / task_id] if task_id is not None else sorted(base.glob("*"))
    out = []
    for d in dirs:
        for p in sorted(d.glob("*.json")):
            try:
                e = json.loads(p.read_text())
            except (OSError, ValueError):
                continue  # being replaced, or damaged: the server's numbers stand
            if isinstance(e, dict) and isinstance(e.get("path"), str):
                out.append(dict(e, task=d.name))
    return out
