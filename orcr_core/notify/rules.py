"""Which events are worth a notification, and what the notification says.

Pure: an event row in, the notifications out. The server looks up names the
event does not carry (a loop's name, a turn's length) and passes them in
``facts``. Import-light (config validation imports :data:`RULES`).
"""

from __future__ import annotations

import socket

from orcr_core.common.times import iso, off, parse_duration

#: rule -> (on by default, what it notifies about)
RULES: dict[str, tuple[bool, str]] = {
    "blocked": (True, "an agent is blocked: a question mid-turn, a dialog at start"),
    "agent_failed": (True, "an agent ended failed or lost"),
    "loop_failed": (True, "a loop run ended failed or timeout"),
    "task_parked": (True, "a task moved to inbox/ (a question) or failed/ (out of attempts)"),
    "land_failed": (True, "tasks land did not land a task: a conflict, a red check, a refusal"),
    "task_landed": (False, "tasks land landed a task on its branch"),
    "budget_reached": (True, "a token budget is spent and holds its scope's queued agents"),
    "usage_limit": (True, "an agent's CLI waits out its plan's usage limit (its provider held)"),
    "turn_ended": (False, "an agent's turn ended (for `match` paths, or turns `longer_than`)"),
    "loop_ok": (False, "a loop run ended ok"),
}


def _glob_ok(patterns: list[str] | None, value: str | None) -> bool:
    if not patterns:
        return True
    if value is None:
        return False
    from orcr_core.paths import glob_match

    return any(glob_match(p, value) for p in patterns)


def rule_settings(cfg, rule: str) -> dict:
    """``notify.rules.<rule>``: enabled (default from :data:`RULES`), match, longer_than."""
    table = cfg.get(f"notify.rules.{rule}") or {}
    return {
        "enabled": bool(table.get("enabled", RULES[rule][0])),
        "match": list(table.get("match") or []),
        "longer_than": table.get("longer_than", 0),
    }


def classify(ev: dict, facts: dict) -> tuple[str, str, dict] | None:
    """(rule, subject, fields) for an event worth a notification, else None.

    ``facts``: ``loop_name`` for run events, ``turn_seconds`` for a turn's end.
    """
    kind, data = ev["kind"], ev["data"]
    path = data.get("path")
    if kind == "budget.reached":
        scope = data.get("scope")
        return (
            "budget_reached",
            scope,
            {
                "title": f"budget {scope} reached",
                "text": f"agents in {scope} wait: {data.get('reason')}",
                "action": f"orcr config set 'budget.\"{scope}\".tokens' N, or wait",
            },
        )
    if kind == "agent.usage_limit":
        held = f"; new {data.get('provider')} agents wait too" if data.get("hold") else ""
        return (
            "usage_limit",
            path,
            {
                "title": f"{path}: {data.get('reason')}",
                "text": f"{path} waits out {data.get('provider')}'s usage limit and goes on "
                f"by itself{held}",
                "action": f"orcr agent attach {path}",
            },
        )
    if kind == "agent.blocked":
        what = (
            "asks a question mid-turn" if data.get("status") == "working" else "waits on a dialog"
        )
        return (
            "blocked",
            path,
            {
                "title": f"{path} is blocked",
                "text": f"{path} {what} ({data.get('dialog')}): {data.get('reason')}",
                "action": f"orcr agent attach {path}",
            },
        )
    if kind == "agent.status":
        to, reason = data.get("to"), data.get("exit_reason")
        if to == "ended" and reason in ("failed", "lost", "oom"):
            err = f": {data['error']}" if data.get("error") else ""
            act = f"orcr agent resume {path}" if reason == "lost" else f"orcr agent get {path}"
            return (
                "agent_failed",
                path,
                {
                    "title": f"{path} ended {reason}",
                    "text": f"{path} ended {reason}{err}",
                    "action": act,
                },
            )
        # an --rm agent's turn ends it: working -> ended done is a turn's end too
        if data.get("from") == "working" and (to == "idle" or reason == "done"):
            secs = facts.get("turn_seconds")
            took = f" after {secs:.0f}s" if secs is not None else ""
            return (
                "turn_ended",
                path,
                {
                    "title": f"{path} finished a turn",
                    "text": f"{path}'s turn ended {data.get('turn_status') or 'ok'}{took}",
                    "action": f"orcr agent read {path}",
                },
            )
        return None
    if kind == "run.status" and data.get("to") in ("failed", "timeout", "ok"):
        name, run_id, to = facts.get("loop_name") or ev.get("loop"), data.get("run_id"), data["to"]
        code = f" (exit {data['exit_code']})" if data.get("exit_code") is not None else ""
        return (
            "loop_ok" if to == "ok" else "loop_failed",
            name,
            {
                "title": f"loop {name} run {run_id} {to}",
                "text": f"loop {name}: run {run_id} ended {to}{code}",
                "action": f"orcr loop logs {name} --run {run_id}",
                "loop": name,
                "run": run_id,
            },
        )
    if kind == "task.moved" and data.get("from") == "landing":
        task, queue, to = data.get("task"), data.get("queue"), data.get("to")
        landed = to == "landed"
        return (
            "task_landed" if landed else "land_failed",
            task,
            {
                "title": f"task {task} landed" if landed else f"task {task} did not land",
                "text": f"task {task} in {queue} moved to {to}/: {data.get('reason') or '-'}",
                "action": f"orcr tasks show {queue} {task}",
                "task": task,
                "queue": queue,
            },
        )
    if kind == "task.moved" and data.get("to") in ("inbox", "failed"):
        task, queue, to = data.get("task"), data.get("queue"), data["to"]
        act = (
            f"orcr tasks answer {queue} {task} ANSWER"
            if to == "inbox"
            else f"orcr tasks show {queue} {task}"
        )
        why = "asks a question" if to == "inbox" else "failed its last attempt"
        return (
            "task_parked",
            task,
            {
                "title": f"task {task} {why}",
                "text": f"task {task} in {queue} moved to {to}/: {data.get('reason') or why}",
                "action": act,
                "task": task,
                "queue": queue,
            },
        )
    return None


def notes_for(ev: dict, cfg, facts: dict) -> list[tuple[str, str, dict]]:
    """The (rule, subject, note) an event makes under the config's rules (0 or 1)."""
    found = classify(ev, facts)
    if found is None:
        return []
    rule, subject, fields = found
    settings = rule_settings(cfg, rule)
    if not settings["enabled"] or not _glob_ok(settings["match"], subject):
        return []
    if rule == "turn_ended":
        longer = settings["longer_than"]
        if not settings["match"] and off(longer):
            return []  # opt-in needs a path or a length: every turn of every agent is noise
        if not off(longer) and (facts.get("turn_seconds") or 0) < parse_duration(longer):
            return []
    note = {
        "key": str(ev["seq"]),
        "rule": rule,
        "subject": subject,
        **fields,
        "agent": ev["data"].get("path"),
        "uuid": ev.get("agent"),
        "event": {"seq": ev["seq"], "kind": ev["kind"], "ts": iso(ev["ts"], "seconds")},
        "at": iso(ev["ts"], "seconds"),
        "host": socket.gethostname(),
    }
    return [(rule, subject or "-", note)]


def digest(rule: str, notes: list[dict]) -> dict:
    """One notification standing for many of one rule (a burst, or ones held by the
    rate limit): its key names the first and last event it covers."""
    seqs = [int(n["event"]["seq"]) for n in notes]
    subjects = list(dict.fromkeys(n["subject"] for n in notes))
    shown = ", ".join(subjects[:10]) + (
        f" and {len(subjects) - 10} more" if len(subjects) > 10 else ""
    )
    return {
        "key": f"digest-{min(seqs)}-{max(seqs)}",
        "rule": rule,
        "subject": "*",
        "title": f"{len(notes)} × {RULES[rule][1].split(':')[0]}",
        "text": f"{len(notes)} notifications of rule {rule}: {shown}",
        "action": "orcr top",
        "digest": [{k: n.get(k) for k in ("key", "subject", "title", "action")} for n in notes],
        "count": len(notes),
        "at": notes[-1]["at"],
        "host": notes[-1]["host"],
    }
