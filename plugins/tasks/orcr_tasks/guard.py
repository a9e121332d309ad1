"""The claim guard: a host ends its own agents once their claims are gone.

A claim is reaped (its heartbeat went stale) or fenced (claimed again by
another worker) by whichever worker, on whichever host, notices first; but the
agent it had started runs on the host of the worker that claimed it, under
that host's orcr server, which knows nothing of the queue. A reaper on another
host cannot end it (its own orcr never ran it), and when the worker that
started it was killed alone, the agent would run on until its turn's timeout.

So every ``orcr tasks work`` starts one guard beside it: a small process in a
session of its own (``python -m orcr_tasks.guard --every S``, the queue in
``ORCR_TASKS_DIR``), holding the
read end of a pipe whose write end only the worker holds. Every ``--every``
seconds it sweeps (:func:`sweep`): each live agent of the local orcr under
``tasks/<queue>/`` whose claim token (the last part of its path,
``<role>_<token>``) holds no claim in the queue any more is ended. It ends
only on evidence: a queue it cannot read, or a claim whose heartbeat it cannot
read, ends nothing. Once its worker is gone (the pipe reads end of file) it
exits after the first sweep that finds no live agent of the queue left, or
when orcr has stayed unreachable for ``--limit`` seconds. The bound is in
docs/tasks.md ("Heartbeat or be reaped"); the decision in docs/decisions.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from orcr_tasks.location import agent_segment, whereabouts
from orcr_tasks.spent import record

#: the claim states: a task in any other has no claim
CLAIMED = ("doing", "verifying")


def held_claims(queue) -> dict[str, str | None]:
    """The queue's claims: agent segment -> its claim token (None: a claim whose
    heartbeat cannot be read, so whose agent is left alone)."""
    out: dict[str, str | None] = {}
    for state in CLAIMED:
        for tid in queue.ids(state):
            hb = queue.read_heartbeat(tid)
            out[agent_segment(tid)] = (hb or {}).get("token")
    return out


def orphans(queue, agents: list[dict]) -> list[dict]:
    """The agents in ``agents`` (listed first, so none started after the claims were
    read is judged) whose claim is gone: their task holds no claim, or another."""
    if not agents:
        return []
    claims = held_claims(queue)
    found = []
    for a in agents:
        parts = a["path"].split("/")
        if len(parts) != 4 or "_" not in parts[3]:
            continue  # not a worker's agent
        token = parts[3].split("_", 1)[1]
        seg = parts[2]
        if seg in claims and (claims[seg] is None or claims[seg] == token):
            continue  # still held (or cannot tell): leave it
        found.append(a)
    return found


def sweep(queue, orcr) -> tuple[list[dict], int]:
    """End this host's agents of ``queue`` whose claims are gone; returns (the agents
    ended, how many of the queue's agents were live before)."""
    agents = orcr.list(prefix=f"tasks/{queue.name}")
    ended = []
    for a in orphans(queue, agents):
        try:
            orcr.kill(a["uuid"])
            ended.append(a)
        except Exception:  # ended meanwhile
            continue
        say(f"ended {a['path']} ({a['uuid']}): its claim was reaped or taken over")
        tid = task_of(queue, a["path"].split("/")[2])
        if tid is not None:  # what it spent, for every host's `tasks show`
            record(queue, orcr, tid, a["uuid"], say)
    return ended, len(agents)


def task_of(queue, segment: str) -> str | None:
    """The task whose agents' paths carry ``segment``."""
    from orcr_tasks.queue import STATES

    for state in STATES:
        for tid in queue.ids(state):
            if agent_segment(tid) == segment:
                return tid
    return None


def end_agent(orcr, say=None):
    """An ``on_reap`` callback: end the agent a reaped claim had started, when it runs
    under this host's orcr; one another host's orcr runs is left to that host's guard
    (:mod:`orcr_tasks.guard`), which ends it within its ``--heartbeat``."""
    here = whereabouts()

    def kill(tid: str, hb: dict) -> None:
        if not hb.get("uuid"):
            return
        if hb.get("orcr") is not None and (hb.get("host"), hb["orcr"]) != (
            here["host"],
            here["orcr"],
        ):
            if say is not None:
                say(
                    f"{tid}: its agent {hb.get('agent')} runs on {hb.get('host')} (orcr "
                    f"{hb.get('orcr_data')}): that host's claim guard ends it"
                )
            return
        try:
            orcr.kill(hb["uuid"])
        except Exception:  # already ended, or no server: nothing to end
            pass

    return kill


def spawn(spec: str, every: float, limit: float) -> subprocess.Popen:
    """Start the guard of a worker; the worker keeps the returned process's stdin open
    for as long as it lives (the kernel closes it when the worker dies). The queue is
    passed in ``ORCR_TASKS_DIR``, never on the command line: a URL may carry a password."""
    return subprocess.Popen(
        [sys.executable, "-m", "orcr_tasks.guard", "--every", str(every), "--limit", str(limit)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        env=dict(os.environ, ORCR_TASKS_DIR=spec), start_new_session=True, close_fds=True,
    )  # fmt: skip


def say(msg: str) -> None:
    print(f"orcr tasks [guard {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def run(spec: str, every: float, limit: float) -> int:
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client, ServerError
    from orcr_tasks.opener import open_queue

    worker_gone = threading.Event()

    def watch_worker():
        try:
            sys.stdin.buffer.read()
        finally:
            worker_gone.set()

    threading.Thread(target=watch_worker, daemon=True).start()
    queue = open_queue(spec)
    orcr = Orcr(Client(autostart=False))  # orcr stopped: nothing of it runs to end
    unreachable_since = last_error = None
    while True:
        gone = worker_gone.is_set()  # read before the sweep: an agent it started is listed
        try:
            ended, live = sweep(queue, orcr)
            unreachable_since = last_error = None
            if gone and live - len(ended) <= 0:
                return 0
        except (ServerError, OSError) as exc:
            orcr.close()
            now = time.monotonic()
            unreachable_since = unreachable_since or now
            if gone and now - unreachable_since > limit:
                say(f"orcr unreachable for {now - unreachable_since:.0f}s ({exc}); exiting")
                return 0
        except Exception as exc:  # the queue unreadable (a database outage): end nothing
            why = f"{type(exc).__name__}: {exc}"
            if why != last_error:  # once per outage, not every sweep
                say(f"sweep: {why}; ending nothing until the queue can be read")
            last_error = why
        if gone:
            time.sleep(every)
        else:
            worker_gone.wait(every)  # the worker's end wakes it: one more sweep, then exit


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m orcr_tasks.guard", description=__doc__)
    p.add_argument("--every", type=float, default=30.0, help="seconds between sweeps")
    p.add_argument("--limit", type=float, default=600.0, help="how long orcr may stay away")
    a = p.parse_args(argv)
    spec = os.environ.get("ORCR_TASKS_DIR")
    if not spec:
        p.error("ORCR_TASKS_DIR names no queue (a directory or a postgresql:// URL)")
    return run(spec, a.every, a.limit)


if __name__ == "__main__":
    sys.exit(main())
