"""What the agents are told, and what their answers mean.

Three line prefixes in an answer mean something (the last such line wins):

* ``QUESTION: ...`` (builder): park the task in inbox/ and move on.
* ``REVISION: ...`` (builder): the revision the verifier is to check.
* ``VERDICT: pass`` / ``VERDICT: reject <why>`` (verifier); an answer with no
  verdict line sends the task back to review/ (not an attempt).
"""

from __future__ import annotations

import re
import shutil

from orcr_tasks.taskfile import Task

#: providers of distinct model families, in order of preference for verifiers
MODEL_FAMILIES = ("claude", "codex")


def last_line(text: str, key: str) -> str | None:
    found = re.findall(rf"^[ \t>*_`]*{key}:[ \t]*(.*)$", text or "", re.M | re.I)
    return found[-1].strip() if found else None


def answered_questions(task: Task) -> set[str]:
    """Questions the coordinator already answered: asking one again does not park."""
    asked = re.findall(r"^## Question[^\n]*\n+(.*?)\n+(?=## |\Z)", task.body, re.M | re.S)
    return {q.strip() for q in asked} if "## Answer" in task.body else set()


def builder_prompt(queue, task: Task) -> str:
    """The task text first (so an agent's leading directives work), then the rules."""
    return (
        f"{task.body.strip()}\n\n"
        f"----\n"
        f"This is task {task.id} of the task queue {queue.label}. It is done when: "
        f"{task.meta.get('done_when', '')}\n"
        "Do the work, then answer with a short report. Write the revision a verifier should "
        "check on a line of its own that starts with the word REVISION and a colon. If only "
        "the coordinator can answer a question that blocks you, write it on a line that "
        "starts with the word QUESTION and a colon, and stop.\n"
    )


def verifier_prompt(task: Task) -> str:
    """What a verifier sees: the finish condition, the revision, the task's own text.
    Never the builder's results or reasoning (rule: a persuasive write-up makes it
    easier to approve wrong work), nor where the queue is (its results/ live there)."""
    return (
        f"{task.meta.get('done_when', '')}\n\n"
        f"----\n"
        f"Verify task {task.id}: check that the condition above holds at revision "
        f"{task.meta.get('revision') or '(none given)'} by running it, not by reading a diff "
        "and deciding. The task was:\n\n"
        f"{task.text}\n\n"
        "End your answer with a line that starts with the word VERDICT and a colon, then "
        "pass, or reject and why, or unverifiable and why when you could not run the check "
        "(never pass what you did not run).\n"
    )


#: a verdict that is neither: the verifier could not run the finish condition
UNVERIFIABLE = "unverifiable"


def verdict_of(answer: str) -> bool | str | None:
    """True (pass), False (a reject: any other verdict), :data:`UNVERIFIABLE` (the
    verifier could not run the check: a question for a person, never a pass), None
    (no verdict line)."""
    verdict = last_line(answer, "VERDICT")
    if not verdict:
        return None
    word = verdict.lower().split()[0].strip(".:,!*`")
    return UNVERIFIABLE if word == UNVERIFIABLE else word in ("pass", "passed")


def installed_families() -> list[str]:
    return [p for p in MODEL_FAMILIES if shutil.which(p)]


def pick_verifier_provider(
    builder: str | None, used: list[str], candidates: list[str]
) -> str | None:
    """Another provider than the builder's (and than earlier verifiers') where one
    is available; the builder's own only when nothing else is."""
    for p in candidates:
        if p != builder and p not in used:
            return p
    for p in candidates:
        if p != builder:
            return p
    return candidates[0] if candidates else builder
