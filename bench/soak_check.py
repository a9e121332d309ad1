"""The soak's checker (issue 27): proves invariants over a store's event history.

:func:`check` replays the ``event`` table in ``seq`` order (what :func:`read_events`
reads, read-only, from ``$ORCR_HOME/store.db``) plus the final state the runner saw
after the wind-down, and returns a :class:`Report` whose violations each carry the
first violating history excerpt. The invariants:

- ``cap``: never more live agents (``starting``, ``working``, ``idle``) than the global
  cap, or than a provider's cap, at any event (counted by replaying ``agent.status``);
- ``fifo``: a promotion (``queued → starting``) never passes a row of the same
  provider queued earlier (lower ``queue_seq``) that is still queued;
- ``pane``: no agent with two panes at once, no pane with two agents;
- ``status``: every agent's history is a path of the documented state machine
  (``orcr_core.agents.lifecycle.TRANSITIONS``), starting from ``agent.queued``; an end
  by idle GC only from ``idle``, by a turn's timeout only from ``working``;
- ``applied``: every ``*_requested`` has its ``*_applied`` (or the failure event of the
  pair) or a repair event afterwards; a turn's ``prompt.applied`` settles its paste and
  Enter steps (a delivery resumed after a multiplexer error decides from the pane and
  the transcript, and the ``once`` rule checks what the agent received);
- ``run``: every loop run's status history is a path, ending in exactly one final
  status, ``ok`` only with exit code 0 and ``failed`` only without; at most one pending
  scheduled run per loop, never more running than its ``--max-concurrency``;
- ``fire``: no fire replayed (a loop's ``due`` times strictly increase, and none is at
  or before a fire logged as missed), none fired later than ``loops.missed_after``
  (``caps["missed_after"]``, when given) past its due time, by the event's own time
  (with :data:`LATE_SLACK` for a transaction that waited on the store's lock);
- ``once``: every echo agent's transcript (``agents/<uuid>/echo.jsonl``) received each
  prompt once: no text in two turns (the soak's prompts are unique per agent) and the
  first turn exactly ``launch.json``'s prompt (a prompt pasted twice before its Enter
  arrives as one doubled text);
- ``final``: nothing active, no pane and no process of the instance left at the end.

Importable by tests (tests/test_soak_check.py feeds it synthetic histories). The report's
shape is in ``_soak_report``, the rules over files left at the end in ``_soak_files``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

from _soak_files import TASK_STATES, check_tasks, check_transcripts
from _soak_report import Report, Violation

__all__ = [
    "TASK_STATES",
    "Report",
    "Violation",
    "check",
    "check_tasks",
    "check_transcripts",
    "read_events",
]

TRANSITIONS = {
    "queued": ("starting", "ended"),
    "starting": ("working", "idle", "ended"),
    "working": ("idle", "lost", "ended"),
    "idle": ("working", "lost", "ended"),
    "lost": ("working", "idle", "ended"),
    "ended": (),
}
LIVE = ("starting", "working", "idle")
RUN_MOVES = {
    "pending": ("running", "canceled"),
    "running": ("stopping", "ok", "failed", "timeout", "stopped"),
    "stopping": ("ok", "failed", "timeout", "stopped"),
}
RUN_ENDED = ("ok", "failed", "timeout", "stopped", "canceled")
#: intent kind -> the kinds that settle it (its applied event, or the pair's failure)
PAIRS = {
    "pane.start_requested": ("pane.start_applied",),
    "pane.close_requested": ("pane.close_applied",),
    "pane.move_requested": ("pane.moved", "pane.move_failed"),
    "prompt.requested": ("prompt.applied", "prompt.failed"),
    "prompt.paste_requested": ("prompt.paste_applied",),
    "prompt.enter_requested": ("prompt.enter_applied",),
    "prompt.resubmit": ("prompt.resubmit_applied",),
    "worktree.requested": ("worktree.created", "worktree.removed"),
    "run.signal_requested": ("run.signal_applied", "run.dead"),
}
#: a start's intents an agent's end settles when it failed or was canceled mid-start;
#: a close or a move must always be applied or repaired
START_INTENTS = ("pane.start_requested", "prompt.requested", "prompt.paste_requested",
                 "prompt.enter_requested", "prompt.resubmit")  # fmt: skip
START_FAILED = ("failed", "canceled")
#: ends a state decides: idle GC ends an idle agent, a turn's timeout a working one (a
#: decision taken on a stale read, e.g. GC racing an ``agent send``, ends the wrong one)
END_FROM = {"gc": ("idle",), "timeout": ("working",)}
#: a task builder's agent path (plugins/tasks worker.py): tasks/<queue>/<task>/build_<token>
BUILDER = re.compile(r"^tasks/([^/]+/[^/]+)/build_[^/]+$")
REPAIRS = ("agent.repaired", "agent.rematched", "run.recovered", "run.dead")
#: seconds a fire's event may be written after the server decided to fire it (the
#: server stopped by a fault in between, a wait on the store's write lock)
LATE_SLACK = 10.0


def when(value) -> float | None:
    """A time in an event: Unix seconds, or the ISO 8601 text loop events carry."""
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def read_events(db: Path) -> list[dict]:
    """The event table, in ``seq`` order, read-only (the store may still be open)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute(
            "SELECT seq, ts, kind, agent, loop, run, data FROM event ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    keys = ("seq", "ts", "kind", "agent", "loop", "run", "data")
    return [dict(zip(keys, (*r[:6], json.loads(r[6] or "{}")), strict=True)) for r in rows]


class _Checker:
    def __init__(self, caps: dict, final: dict):
        self.caps, self.final = caps, final
        self.violations: list[Violation] = []
        self.counts: Counter = Counter()
        self.history: dict[str, list[dict]] = defaultdict(list)  # agent/run -> its events
        self.status: dict[str, str] = {}
        self.provider: dict[str, str] = {}
        self.queued: dict[str, tuple[str, int]] = {}  # agent -> (provider, queue_seq)
        self.pane_of: dict[str, str] = {}
        self.agent_of: dict[str, str] = {}
        self.open: dict[tuple[str, str], dict] = {}  # (owner, intent kind) -> the intent
        self.run_status: dict[str, str] = {}
        self.run_loop: dict[str, str] = {}
        self.run_kind: dict[str, str] = {}
        self.last_due: dict[str, float] = {}
        self.missed_until: dict[str, float] = {}
        self.paths: dict[str, str] = {}  # builder agent -> its task (queue/task)
        self.late = caps.get("missed_after", float("inf"))

    def bad(self, rule: str, e: dict, message: str, owner: str | None = None) -> None:
        hist = self.history.get(owner or e.get("agent") or e.get("run") or "", [])
        tail = [x for x in hist if x["seq"] <= e["seq"]][-12:] or [e]
        after = e.get("ts", 0) - self.t0 if self.t0 is not None else 0.0
        self.violations.append(Violation(rule, e["seq"], message, tail, after))

    def run(self, events: list[dict]) -> Report:
        self.t0 = events[0]["ts"] if events else None
        for e in events:
            self.counts["events"] += 1
            owner = e.get("agent") or e.get("run")
            if owner:
                self.history[owner].append(e)
            kind = e["kind"]
            if kind == "agent.queued":
                self.on_queued(e)
            elif kind == "agent.status":
                self.on_status(e)
            elif kind.startswith("run.") or kind.startswith("loop."):
                self.on_loop(e)
            if kind in ("pane.start_applied", "agent.rematched", "agent.repaired") or (
                kind == "pane.moved" and e["data"].get("pane_id")
            ):
                self.on_pane(e)
            elif kind == "pane.close_applied":
                self.release(e["agent"])
            self.on_pairs(e)
        self.at_end(events)
        return Report(self.violations, self.counts)

    # -- agents --------------------------------------------------------------------
    def on_queued(self, e: dict) -> None:
        a, d = e["agent"], e["data"]
        if a not in self.status:
            self.counts["agents"] += 1
        elif self.status[a] not in ("ended", "lost"):
            self.bad("status", e, f"{d.get('path')} queued again while {self.status[a]}")
        self.status[a] = "queued"
        self.provider[a] = d.get("provider", "?")
        self.queued[a] = (self.provider[a], d.get("queue_seq", 0))

    def on_status(self, e: dict) -> None:
        a, d = e["agent"], e["data"]
        frm, to = d.get("from"), d.get("to")
        prev = self.status.get(a)
        path = d.get("path")
        if prev is None:
            self.bad("status", e, f"{path}: a status change before agent.queued")
        elif frm != prev:
            self.bad("status", e, f"{path}: moved from {frm} but its last status was {prev}")
        elif to not in TRANSITIONS.get(frm, ()) and not (
            to == "queued" and d.get("resume") is True and frm in ("lost", "ended")
        ):
            self.bad("status", e, f"{path}: {frm} -> {to} is not a legal transition")
        why = d.get("exit_reason")
        if to == "ended" and why in END_FROM and frm not in END_FROM[why]:
            self.bad("status", e, f"{path}: ended {why} while {frm} (only from {END_FROM[why]})")
        self.provider.setdefault(a, d.get("provider", "?"))
        if to == "queued":  # resumed: the same row, queued again (its new queue_seq)
            self.queued[a] = (self.provider[a], d.get("queue_seq", e["seq"]))
        if frm == "queued" and to == "starting":
            self.counts["promotions"] += 1
            self.check_fifo(e)
        if to != "queued":
            self.queued.pop(a, None)
        self.status[a] = to
        if to == "ended":
            self.counts["ended"] += 1
        if to in ("ended", "lost", "queued"):
            self.release(a)
        if to in LIVE and frm not in LIVE:  # the count only grows when a row enters LIVE
            self.check_caps(e)
            self.check_one_build(e)

    def check_fifo(self, e: dict) -> None:
        a = e["agent"]
        provider, seq = self.queued.get(a, (self.provider.get(a), None))
        if seq is None:
            return
        older = [
            (s, x)
            for x, (p, s) in self.queued.items()
            if x != a and p == provider and s < seq and self.status.get(x) == "queued"
        ]
        if older:
            s, x = min(older)
            self.bad(
                "fifo",
                e,
                f"{e['data'].get('path')} (queue_seq {seq}) promoted before {x[:8]} "
                f"(queue_seq {s}, {provider}, still queued)",
            )

    def check_caps(self, e: dict) -> None:
        live = [a for a, s in self.status.items() if s in LIVE]
        total = len(live)
        provider = self.provider.get(e["agent"])
        mine = sum(1 for a in live if self.provider.get(a) == provider)
        cap, pcap = self.caps.get("max"), self.caps.get(provider)
        if cap is not None and total > cap:
            self.bad("cap", e, f"{total} agents live, over the global cap {cap}")
        elif pcap is not None and mine > pcap:
            self.bad("cap", e, f"{mine} {provider} agents live, over its cap {pcap}")

    def check_one_build(self, e: dict) -> None:
        m = BUILDER.match(e["data"].get("path") or "")
        if not m:
            return
        self.paths[e["agent"]] = m.group(1)
        others = [
            x
            for x, task in self.paths.items()
            if task == m.group(1) and x != e["agent"] and self.status.get(x) in LIVE
        ]
        if others:
            self.bad("task", e, f"task {m.group(1)} built twice at once (with {others[0][:8]})")

    def on_pane(self, e: dict) -> None:
        a, pane = e["agent"], e["data"].get("pane_id")
        if not a or not pane:
            return
        other = self.agent_of.get(pane)
        # a holder still starting may have lost its pane with its multiplexer (a tmux
        # server killed, a herdr SIGKILLed before it saved), whose next server hands the
        # id out again before the holder's pipeline finds its pane gone: not a double
        # booking; its prompt typed into the new pane would be (the ``once`` rule)
        if (
            other
            and other != a
            and self.status.get(other) not in ("ended", "lost", "starting", None)
        ):
            self.bad("pane", e, f"pane {pane} given to {a[:8]} while {other[:8]} holds it")
        old = self.pane_of.get(a)
        if old and old != pane and e["kind"] == "pane.start_applied":
            self.bad("pane", e, f"{e['data'].get('path')} got pane {pane} while holding {old}")
        if old:
            self.agent_of.pop(old, None)
        self.pane_of[a], self.agent_of[pane] = pane, a

    def release(self, a: str | None) -> None:
        pane = self.pane_of.pop(a, None) if a else None
        if pane and self.agent_of.get(pane) == a:
            del self.agent_of[pane]

    def on_pairs(self, e: dict) -> None:
        owner = e.get("agent") or e.get("run")
        kind, d = e["kind"], e["data"]
        if kind in PAIRS:
            self.open[(owner, kind)] = e
            return
        for intent, settles in PAIRS.items():
            if kind in settles:
                self.open.pop((owner, intent), None)
        if kind in ("prompt.applied", "prompt.failed"):
            # the delivery's own verdict on its turn (``confirmed`` or not, or failed): a step
            # whose applied a multiplexer error or a restart cut off was resumed from
            # what the pane and the transcript showed (agents/delivery.py), and its
            # Enter pressed again as ``prompt.resubmit`` if needed (agents/resubmit.py);
            # the once rule checks what the agent received
            for intent in ("prompt.paste_requested", "prompt.enter_requested", "prompt.resubmit"):
                self.open.pop((owner, intent), None)
        if kind == "agent.status" and d.get("exit_reason") in START_FAILED:
            # a start that failed or was canceled mid-way: its end (with the error) is
            # the failure record of the start's and the first prompt's intents
            for intent in START_INTENTS:
                self.open.pop((owner, intent), None)
        if kind in REPAIRS or d.get("repair") is True:
            for key in [k for k in self.open if k[0] == owner]:
                del self.open[key]

    # -- loops ---------------------------------------------------------------------
    def on_loop(self, e: dict) -> None:
        kind, d, loop, run = e["kind"], e["data"], e.get("loop"), e.get("run")
        if loop:
            self.history[loop].append(e)
        if kind in ("loop.fired", "loop.coalesced", "loop.skipped"):
            self.counts["fires"] += kind == "loop.fired"
            due = when(d.get("due"))  # the fire's own due time (a coalesced run's is due_at)
            if due is not None:
                if due <= self.last_due.get(loop, float("-inf")):
                    self.bad("fire", e, f"fire due {d['due']} replayed", loop)
                elif due < self.missed_until.get(loop, float("-inf")):
                    self.bad("fire", e, f"fire due {d['due']} was logged missed", loop)
                elif kind == "loop.fired" and e["ts"] - due > self.late + LATE_SLACK:
                    self.bad(
                        "fire",
                        e,
                        f"fire due {d['due']} fired {e['ts'] - due:.0f}s late: a missed fire "
                        f"replayed (loops.missed_after {self.late:g}s)",
                        loop,
                    )
                self.last_due[loop] = max(due, self.last_due.get(loop, due))
        elif kind == "loop.missed":
            # every fire from ``first`` up to (not including) ``next_fire_at`` was skipped
            until = when(d.get("next_fire_at")) or when(d.get("first"))
            if until is not None:
                self.missed_until[loop] = max(until, self.missed_until.get(loop, until))
                first = when(d.get("first"))
                if first is not None:
                    self.last_due[loop] = max(first, self.last_due.get(loop, first))
        elif kind == "run.status" and run:
            self.on_run_status(e, loop, run)

    def on_run_status(self, e: dict, loop: str, run: str) -> None:
        d = e["data"]
        frm, to = d.get("from"), d.get("to")
        prev = self.run_status.get(run)
        if run not in self.run_loop:
            self.counts["runs"] += 1
            self.run_loop[run] = loop
        if d.get("run_kind"):
            self.run_kind[run] = d["run_kind"]
        if prev in RUN_ENDED:
            self.bad("run", e, f"run {d.get('run_id')} moved {frm} -> {to} after ending {prev}")
        elif prev is not None and frm != prev:
            self.bad("run", e, f"run {d.get('run_id')} moved from {frm}, its status was {prev}")
        elif frm is not None and to not in RUN_MOVES.get(frm, ()):
            self.bad("run", e, f"run {d.get('run_id')}: {frm} -> {to} is not a legal move")
        if to == "ok" and d.get("exit_code") not in (0, None):
            self.bad("run", e, f"run {d.get('run_id')} ok with exit code {d.get('exit_code')}")
        if to == "failed" and d.get("exit_code") == 0:
            self.bad("run", e, f"run {d.get('run_id')} failed with exit code 0")
        self.run_status[run] = to
        mine = [r for r, lp in self.run_loop.items() if lp == loop]
        pending = [
            r
            for r in mine
            if self.run_status.get(r) == "pending" and self.run_kind.get(r) == "scheduled"
        ]
        if len(pending) > 1:
            self.bad("run", e, f"{len(pending)} pending scheduled runs of one loop", run)
        cap = self.caps.get("loops", {}).get(loop)
        running = sum(1 for r in mine if self.run_status.get(r) in ("running", "stopping"))
        if cap is not None and running > cap:
            self.bad("run", e, f"{running} runs active, over the loop's max-concurrency {cap}", run)

    # -- the end -------------------------------------------------------------------
    def at_end(self, events: list[dict]) -> None:
        last = events[-1] if events else {"seq": 0, "kind": "-", "data": {}}
        for (owner, intent), e in sorted(self.open.items(), key=lambda kv: kv[1]["seq"]):
            self.bad("applied", e, f"{intent} never applied nor repaired", owner)
        for run, status in self.run_status.items():
            if status not in RUN_ENDED:
                self.bad("run", last, f"run ended the soak {status}, not in a final status", run)
        final = self.final or {}
        for what in ("active_agents", "active_runs", "panes", "processes", "mux_violations"):
            if final.get(what):
                self.bad("final", last, f"{what} left at the end: {final[what][:10]}")
        for what in final.get("typed_elsewhere", []):  # seen by the herdr fault's aim
            self.bad("pane", last, what)


def check(events: list[dict], caps: dict, final: dict | None = None) -> Report:
    """Every invariant over ``events`` (seq order) and ``final``; ``caps`` holds ``max``,
    a cap per provider, and ``loops`` (loop uuid -> max-concurrency)."""
    report = _Checker(caps, final or {}).run(events)
    for root in (final or {}).get("task_queues", []):
        report.violations += check_tasks(Path(root), (final or {}).get("tasks_added"))
    unreached = frozenset(
        e["agent"]
        for e in events
        if e["kind"] == "agent.status"
        and str(e["data"].get("turn_error", "")).startswith("the prompt sent as turn 1 never")
    )
    for root in (final or {}).get("agent_dirs", []):
        report.violations += check_transcripts(Path(root), unreached)
    return report


if __name__ == "__main__":  # python bench/soak_check.py STORE.DB MAX [PROVIDER=CAP ...]
    import sys

    caps = {"max": int(sys.argv[2])}
    caps.update({k: int(v) for k, v in (a.split("=") for a in sys.argv[3:])})
    report = check(read_events(Path(sys.argv[1])), caps)
    print(report.summary())
    print("\n".join(report.excerpt()))
    print(f"violations: {len(report.violations)}")
    sys.exit(1 if report.violations else 0)
