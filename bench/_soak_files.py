"""The soak checker's rules over files left at the end (bench/soak_check.py): a task
queue's task files (``task``) and the echo agents' transcripts (``once``)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from _soak_report import Violation

#: a section that uses up an attempt (plugins/tasks moves.py): its number is the new count
ATTEMPT = re.compile(r"^## (?:Attempt failed|Reject \(verifier [^)]*\)) (\d+) ", re.M)
TASK_STATES = ("backlog", "todo", "doing", "review", "verifying", "done", "failed", "inbox")


def check_tasks(root: Path, added: list[str] | None = None) -> list[Violation]:
    """A task queue's files at the end: each task added (``added``, when given) in
    exactly one state folder, whole (its front matter names it: a write cut by a full
    disk must never leave a task empty or half-written), and its ``attempts`` counted
    exactly once per failed build or reject (the sections that used one up are
    numbered 1, 2, ... attempts, none twice, none missing)."""
    found: dict[str, list[str]] = defaultdict(list)
    for state in TASK_STATES:
        for f in sorted((root / state).glob("*.md")):
            found[f.stem].append(state)
    bad = []
    for tid in added or ():
        if tid not in found:
            where = {"seq": 0, "ts": 0, "kind": "task", "agent": None, "data": {"task": tid}}
            aside = sorted(p.name for p in root.glob(f"*/{tid}*") if p.parent.name != "hb")
            msg = f"task {tid} was added but is in no state (found: {aside})"
            bad.append(Violation("task", 0, msg, [where]))
    for tid, states in sorted(found.items()):
        where = {"seq": 0, "ts": 0, "kind": "task", "agent": None, "data": {"task": tid}}
        if len(states) > 1:
            bad.append(Violation("task", 0, f"task {tid} is in {states} at once", [where]))
            continue
        text = (root / states[0] / f"{tid}.md").read_text(errors="replace")
        meta = text.split("\n---\n", 1)[0]
        if not re.search(rf'^id: "?{re.escape(tid)}"?$', meta, re.M):
            msg = f"task {tid} ({states[0]}): its file is cut or empty ({len(text)} characters)"
            bad.append(Violation("task", 0, msg, [where]))
            continue
        counted = re.search(r"^attempts: (\d+)$", meta, re.M)
        attempts = int(counted.group(1)) if counted else 0
        numbers = [int(n) for n in ATTEMPT.findall(text)]
        if numbers != list(range(1, attempts + 1)):
            bad.append(
                Violation(
                    "task",
                    0,
                    f"task {tid} ({states[0]}): attempts {attempts}, but the attempts "
                    f"used up are numbered {numbers}",
                    [where],
                )
            )
    return bad


def check_transcripts(agents: Path, unreached: frozenset[str] = frozenset()) -> list[Violation]:
    """Each echo agent received each prompt once (the ``once`` rule). ``unreached``:
    agents whose first prompt orcr reported lost with the program (``turn_error``:
    it never reached the agent, send it again; docs/concepts.md "Resume"), whose
    first turn may be a later send."""
    bad = []
    for folder in sorted(agents.iterdir()) if agents.is_dir() else []:
        try:
            launch = json.loads((folder / "launch.json").read_text())
            lines = (folder / "echo.jsonl").read_text().splitlines()
        except (OSError, ValueError):
            continue  # not an echo agent, or never started
        prompts = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill or a full disk
            if rec.get("type") == "prompt":
                prompts.append(rec.get("text", ""))
        where = {"seq": 0, "ts": 0, "kind": "transcript", "agent": launch.get("uuid"),
                 "data": {"path": launch.get("path"), "prompts": prompts[:4]}}  # fmt: skip
        twice = [t for t, n in Counter(prompts).items() if n > 1]
        first = launch.get("prompt")
        if twice:
            msg = f"{launch.get('path')} received {twice[0][:60]!r} twice"
            bad.append(Violation("once", 0, msg, [where]))
        elif (
            first
            and prompts
            and prompts[0].strip() != first.strip()
            and launch.get("uuid") not in unreached
        ):
            msg = f"{launch.get('path')}'s first turn is {prompts[0][:80]!r}, not its prompt"
            bad.append(Violation("once", 0, msg, [where]))
    return bad
