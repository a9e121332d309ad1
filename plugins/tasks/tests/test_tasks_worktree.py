"""``orcr tasks work --worktree`` (issue 22 items 7, 8): each agent in its own checkout;
a builder's REVISION must be a commit it made on its attempt's branch; a verifier
works in a fresh checkout of the revision, removed after the verdict."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from orcr_tasks import checkouts
from orcr_tasks.queue import Queue

FAST = ["--provider", "echo", "--heartbeat", "0.2s", "--drain"]


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def make_repo(root):
    repo = root / "repo"
    git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.email=t@x", "-c", "user.name=t", "commit", "-q", "-m", "first")
    return repo


def test_revision_must_be_a_commit_the_attempt_made(short_tmp):
    repo = make_repo(short_tmp)
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "tasks/q/T1/a1-x")
    git(repo, "checkout", "-q", "tasks/q/T1/a1-x")
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.email=t@x", "-c", "user.name=t", "commit", "-q", "-m", "work")
    made = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    wt = {"repo": str(repo), "branch": "tasks/q/T1/a1-x", "base_commit": base, "path": None}
    assert checkouts.check_revision(wt, made[:10]) == (made, None)
    assert "before the attempt began" in checkouts.check_revision(wt, base)[1]
    assert "not a commit" in checkouts.check_revision(wt, "nosuch")[1]
    assert "no REVISION" in checkouts.check_revision(wt, None)[1]
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "c.txt").write_text("c\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.email=t@x", "-c", "user.name=t", "commit", "-q", "-m", "elsewhere")
    other = git(repo, "rev-parse", "HEAD")
    assert "not on the attempt's branch" in checkouts.check_revision(wt, other)[1]
    # orcr removed the attempt's checkout and its branch (nothing new on it) as the
    # builder's agent ended, while the worker read: the base commit is still named
    # (the CI under load said "not a commit", then "not on the attempt's branch").
    # Planted: no read in the repository -> "not a commit"; the branch checked first
    # -> "not on the attempt's branch"
    gone = short_tmp / "checkout-being-removed"
    gone.mkdir()
    git(repo, "branch", "-D", "tasks/q/T1/a1-x")
    wt = {**wt, "path": str(gone)}
    assert "before the attempt began" in checkouts.check_revision(wt, base[:10])[1]


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_builder_claiming_a_revision_it_did_not_make_fails_and_verifier_gets_a_fresh_checkout(
    live, short_tmp
):
    repo = make_repo(short_tmp)
    head = git(repo, "rev-parse", "HEAD")
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n'
        + f'[worktrees]\ndir = "{short_tmp / "checkouts"}"\n'
    )
    live.start_server()
    q = Queue.init(short_tmp / "q")
    d = str(q.root)
    # T2: built without --worktree, its REVISION taken as given (review/)
    live.run("tasks", "add", d, "--id", "T2", "--done-when", "VERDICT: pass", "--",
             f"Build it.\nREVISION: {head}", check=True)  # fmt: skip
    live.run("tasks", "work", d, "--role", "builder", "--cwd", str(repo), *FAST, check=True)
    assert q.read("review", "T2").meta["revision"] == head
    # T1: with --worktree a REVISION the attempt did not make is a failed attempt
    live.run("tasks", "add", d, "--id", "T1", "--done-when", "VERDICT: pass", "--",
             f"Build it.\nREVISION: {head}", check=True)  # fmt: skip
    r = live.run("tasks", "work", d, "--role", "builder", "--cwd", str(repo), "--worktree",
                 *FAST, check=True, timeout=120)  # fmt: skip
    state = "todo" if "T1" in q.ids("todo") else "failed"
    t = q.read(state, "T1")
    assert t.attempts >= 1 and "before the attempt began" in t.body, (t.body, r.stderr)
    agents = json.loads(live.run("agent", "ls", "--all", "--json", check=True).stdout)
    build = next(a for a in agents if "/build_" in a["path"] and a["worktree"])
    assert build["worktree"]["branch"].startswith(f"tasks/{q.name}/T1/a1-")

    # the verifier works in a fresh checkout of T2's revision, removed after its verdict
    live.run("tasks", "work", d, "--role", "verifier", "--cwd", str(repo), "--worktree",
             *FAST, check=True, timeout=120)  # fmt: skip
    assert q.read("done", "T2").meta["passes"] == ["echo"]
    agents = json.loads(live.run("agent", "ls", "--all", "--json", check=True).stdout)
    verifier = next(a for a in agents if "/verify_" in a["path"])
    wt = verifier["worktree"]
    assert wt["base_commit"] == head and wt["state"] == "removed", wt
    assert wt["branch"].startswith(f"tasks/{q.name}/T2/v-")
    assert git(repo, "branch", "--list", "tasks/*").count("v-") == 0
    status = live.run("tasks", "status", d, check=True).stdout
    assert f"done/T2: revision {head}, no branch" in status, status


def test_status_and_show_name_the_branch_and_revision(short_tmp):
    q = Queue.init(short_tmp / "q")
    q.add("build it", done_when="VERDICT: pass", task_id="T3")
    assert q.claim("builder", "tok", {}, lambda *a: None) == "T3"
    q.moves.finish_build("T3", "tok", "abc123", "claude", results="r\n", branch="tasks/q/T3/a1-tok")
    from orcr_tasks.status import compute, render

    s = compute(q, stale=600)
    assert s["built"] == [
        {"id": "T3", "state": "review", "revision": "abc123", "branch": "tasks/q/T3/a1-tok"}
    ]
    assert "review/T3: revision abc123, branch tasks/q/T3/a1-tok" in render(s)
    text = q.file("review", "T3").read_text()
    assert '"tasks/q/T3/a1-tok"' in text and "abc123" in text


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_builder_that_commits_gets_through_and_its_branch_stays(live, short_tmp):
    """The echo agent behind a wrapper that commits in its checkout (and leaves a
    scratch file) before it starts: REVISION: HEAD is the attempt's own commit, so the
    task goes to review/ with its full id and branch; the verifier passes it in a fresh
    checkout of that commit, which is removed after the verdict though it left a file;
    the done task's branch (and the builder's checkout holding it) stay for a merge."""
    import sys

    repo = make_repo(short_tmp)
    base = git(repo, "rev-parse", "HEAD")
    wrapper = short_tmp / "commit-then-echo"
    wrapper.write_text(
        "#!/bin/sh\n"
        "echo scratch > scratch.txt\n"
        "echo work > work.txt && git add work.txt && "
        "git -c user.email=b@x -c user.name=b commit -qm work\n"
        f'exec {sys.executable} -m orcr_providers.echo_agent "$@"\n'
    )
    wrapper.chmod(0o755)
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n'
        + f'[worktrees]\ndir = "{short_tmp / "checkouts"}"\n'
        + f'[providers.echo]\nargv = ["{wrapper}"]\n'
    )
    live.start_server()
    q = Queue.init(short_tmp / "q")
    d = str(q.root)
    live.run("tasks", "add", d, "--id", "T4", "--done-when", "VERDICT: pass", "--",
             "Build it.\nREVISION: HEAD", check=True)  # fmt: skip
    r = live.run("tasks", "work", d, "--role", "builder", "--cwd", str(repo), "--worktree",
                 *FAST, check=True, timeout=120)  # fmt: skip
    assert "T4" in q.ids("review"), r.stderr
    t = q.read("review", "T4")
    branch = t.meta["branch"]
    assert branch.startswith(f"tasks/{q.name}/T4/a1-")
    made = git(repo, "rev-parse", branch)
    assert t.meta["revision"] == made and made != base
    assert git(repo, "rev-parse", f"{made}^") == base
    live.run("tasks", "work", d, "--role", "verifier", "--cwd", str(repo), "--worktree",
             *FAST, check=True, timeout=120)  # fmt: skip
    assert "T4" in q.ids("done")
    assert git(repo, "rev-parse", branch) == made  # the done task's branch stays
    rows = json.loads(live.run("worktree", "ls", "--json", check=True).stdout)
    assert rows == [], rows  # ... but not its checkout, nor the verifier's
    everything = json.loads(live.run("worktree", "ls", "--all", "--json", check=True).stdout)
    built = next(r for r in everything if r["branch"] == branch)
    assert built["reason"] == f"removed on request; branch {branch} keeps 1 commits", built
    assert not Path(built["path"]).exists()
    # the verifier's checkout held scratch.txt (orcr kept it): the worker removed it
    v = next(r for r in everything if "/v-" in (r["branch"] or ""))
    assert v["reason"] == "removed on request" and v["base_commit"] == made, v


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_checkouts_do_not_pile_up(live, short_tmp):
    """Issue 33 item 5. Each failed attempt (it committed, then named no commit of its
    own) records its branch in its ``## Attempt failed`` section and its checkout goes,
    the branch with its commit staying; with ``keep_checkouts = true`` a built attempt
    keeps its checkout. Planted: the failed attempt's checkout not dropped -> three
    kept checkouts of T6 are listed, fails; no branch note -> fails; keep_checkouts
    ignored -> T5's checkout is removed, fails."""
    import sys

    repo = make_repo(short_tmp)
    wrapper = short_tmp / "commit-then-echo"
    # each attempt's commit its own ($$): two made in one second were one commit, on
    # the first attempt's branch too, and orcr rightly removed the second's branch
    wrapper.write_text(
        "#!/bin/sh\n"
        "echo scratch > scratch.txt\n"
        "echo work $$ > work.txt && git add work.txt && "
        "git -c user.email=b@x -c user.name=b commit -qm work\n"
        f'exec {sys.executable} -m orcr_providers.echo_agent "$@"\n'
    )
    wrapper.chmod(0o755)
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n'
        + f'[worktrees]\ndir = "{short_tmp / "checkouts"}"\n'
        + f'[providers.echo]\nargv = ["{wrapper}"]\n'
    )
    live.start_server()
    q = Queue.init(short_tmp / "q")
    d = str(q.root)
    live.run("tasks", "settings", d, "keep_checkouts=true", check=True)
    live.run("tasks", "add", d, "--id", "T5", "--done-when", "VERDICT: pass", "--",
             "Build it.\nREVISION: HEAD", check=True)  # fmt: skip
    live.run("tasks", "add", d, "--id", "T6", "--done-when", "VERDICT: pass", "--",
             "Build it.\nREVISION: nosuch", check=True)  # fmt: skip
    r = live.run("tasks", "work", d, "--role", "builder", "--cwd", str(repo), "--worktree",
                 *FAST, check=True, timeout=240)  # fmt: skip
    assert q.ids("review") == ["T5"] and q.ids("failed") == ["T6"], r.stderr
    rows = json.loads(live.run("worktree", "ls", "--json", check=True).stdout)
    assert [r["branch"] for r in rows] == [q.read("review", "T5").meta["branch"]], rows
    t6 = q.read("failed", "T6")
    noted = re.findall(r"^branch: (\S+) keeps its 1 commit$", t6.body, re.M)
    assert len(noted) == 3 and all(
        f"/T6/a{n}-" in b for n, b in zip((1, 2, 3), noted, strict=True)
    ), t6.body
    for b in noted:
        assert git(repo, "log", "-1", "--format=%s", b) == "work"  # the attempt's commit stays
