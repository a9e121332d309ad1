"""docs/tasks.md's last section, "The whole playbook, runnable", run as it is written
(issue 37 item 8): its ``sh`` block runs in ``bash -e`` from an empty directory, on
real tmux with echo agents whose ``[sh]`` directive edits, commits and checks files,
builder and verifier workers, and ``tasks land --watch`` started by an ``orcr loop``.
The doc cannot drift from the code: a changed flag, output or outcome fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from orcr_tasks.queue import Queue

DOC = Path(__file__).resolve().parents[3] / "docs" / "tasks.md"
SECTION = "## The whole playbook, runnable"


def playbook_block() -> str:
    text = DOC.read_text()
    assert SECTION in text, f"docs/tasks.md has no section {SECTION!r}"
    blocks = re.findall(r"^```sh\n(.*?)^```", text.split(SECTION, 1)[1], re.M | re.S)
    assert len(blocks) == 1, "the playbook section holds exactly one sh block"
    return blocks[0]


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_the_playbook_in_the_docs_lands_every_task_exactly_once(live, short_tmp):
    """Three tasks built from one main; a and b conflict in notes.txt, so the second to
    land goes back to todo/ with the file named and lands after the builder worker's
    rebuild; every task ends in landed/, its commit on main once, main passing the
    check. Planted: the lander's rebase conflict taken as landable (``Scratch.apply``
    returning the aborted rebase's HEAD) -> the second of a and b lands as built, main
    loses the first one's commit, fails. (The ``[sh]`` directive's own planted bug is
    in test_providers_echo_tui.py.)"""
    live.start_server()
    bindir = os.path.dirname(sys.executable)
    assert os.access(os.path.join(bindir, "orcr"), os.X_OK), f"no orcr script in {bindir}"
    env = dict(live.env, PATH=bindir + os.pathsep + live.env["PATH"])
    env.pop("ORCR_TASKS_DIR", None)
    script = playbook_block()
    try:
        r = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=short_tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired as exc:
        night = short_tmp / "night"
        logs = {n: (night / n).read_text()[-2000:] for n in ("builder.log", "verifier.log")
                if (night / n).exists()}  # fmt: skip
        pytest.fail(f"the playbook did not finish: {exc.stderr!r}\n{logs}")
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    night = short_tmp / "night"
    q = Queue(night / "queue")
    assert sorted(q.ids("landed")) == ["a", "b", "c"], r.stdout
    app = night / "app"
    subjects = git(app, "log", "--format=%s", "main").splitlines()
    assert sorted(subjects) == ["a: a note", "b: a note", "c: c.txt", "start"], subjects
    for tid in ("a", "b", "c"):
        t = q.read("landed", tid)
        assert git(app, "merge-base", "--is-ancestor", t.meta["landed_commit"], "main") == ""
    rebuilt = [t for t in (q.read("landed", "a"), q.read("landed", "b")) if t.attempts]
    assert len(rebuilt) == 1, "exactly one of a and b conflicted"
    assert rebuilt[0].sections("Land failed") == 1 and "notes.txt" in rebuilt[0].body
    assert q.read("landed", "c").attempts == 0
    subprocess.run(["sh", "check.sh"], cwd=app, check=True)  # main passes the check
    assert sorted((app / "notes.txt").read_text().splitlines()[1:]) == [
        "a: first",
        "b: second",
    ]
    assert "landed" in r.stdout and "a: a note" in r.stdout  # tasks ls, git log printed
