"""``orcr tasks work --worktree``: each attempt in a checkout of its own (issue 22 items 7, 8).

A builder's agent runs in an orcr checkout (``agent run --worktree``) of the
repository ``--cwd`` is in, on the branch ``tasks/<queue>/<task>/a<attempt>-<token>``;
its ``REVISION:`` must be a commit it made there (on that branch, not already in
its base), else the attempt fails. A verifier's agent runs in a fresh checkout
of that revision, on a throwaway branch, removed after the verdict (files the
verifier left are discarded; a commit it made stays on its branch: orcr never
drops one). A builder's checkout is removed once its work is recorded: a built
attempt's when the task reaches review/ (unless the queue's ``keep_checkouts``), a
failed attempt's once its branch is written into the failure's section; the branch
stays while it holds commits. A dependant's checkout starts from its dependencies'
revisions merged onto the base (:func:`start_commit`, docs/tasks.md "Dependants").
"""

from __future__ import annotations

import os
import subprocess
import time

from orcr_tasks.location import agent_segment


def branch(queue: str, tid: str, kind: str, attempt: int, token: str) -> str:
    """The branch of one attempt (``a<n>``) or one verification (``v``)."""
    step = f"a{attempt}" if kind == "build" else "v"
    return f"tasks/{agent_segment(queue)}/{tid}/{step}-{token}"


def _git(where: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", where, *args], capture_output=True, text=True, timeout=60)


def check_revision(worktree: dict | None, revision: str | None) -> tuple[str | None, str | None]:
    """(full commit id, None) when ``revision`` is a commit the builder made on its
    branch; (None, why not) otherwise."""
    if not worktree:
        return None, "the builder's agent had no checkout"
    if not revision:
        return None, "the builder gave no REVISION: line (the commit a verifier is to check)"
    repo, br, base = worktree.get("repo"), worktree.get("branch"), worktree.get("base_commit")
    # read in the attempt's checkout while it exists (HEAD there is the builder's); orcr
    # removes one whose branch holds nothing new as its agent ends, maybe mid-read: then
    # in the repository (the checkouts share its objects)
    here = worktree.get("path") if os.path.isdir(worktree.get("path") or "") else repo
    full = _commit(here, revision) or (_commit(repo, revision) if here != repo else None)
    if full is None:
        return None, f"REVISION {revision} is not a commit in {repo}"
    # the base first: a branch that holds nothing new may be gone already (removed with
    # its checkout), and a commit from before the attempt is why it holds nothing
    if base and _ancestor(repo, full, base):
        return (
            None,
            f"REVISION {revision} was there before the attempt began (its base {base[:12]})",
        )
    if not _ancestor(repo, full, f"refs/heads/{br}"):
        return None, f"REVISION {revision} is not on the attempt's branch {br}"
    return full, None


def repo_root(cwd: str) -> str | None:
    """The git repository ``cwd`` is in (its top level), or None."""
    try:
        res = _git(cwd, "rev-parse", "--show-toplevel")
    except OSError:
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def _commit(repo: str, rev: str) -> str | None:
    res = _git(repo, "rev-parse", "--verify", "--quiet", rev + "^{commit}")
    return res.stdout.strip() if res.returncode == 0 else None


def _ancestor(repo: str, old: str, new: str) -> bool:
    return _git(repo, "merge-base", "--is-ancestor", old, new).returncode == 0


#: who the merge commits a dependant starts from are by (a machine-made merge)
MERGER = {
    "GIT_AUTHOR_NAME": "orcr tasks",
    "GIT_AUTHOR_EMAIL": "orcr-tasks@localhost",
    "GIT_COMMITTER_NAME": "orcr tasks",
    "GIT_COMMITTER_EMAIL": "orcr-tasks@localhost",
}


def start_commit(
    repo: str, base: str | None, deps: list[tuple[str, str | None]], tid: str
) -> tuple[str | None, str | None]:
    """Where a dependant's checkout starts: its dependencies' verified revisions
    merged onto ``base`` (else ``HEAD``), one after another; (commit, None), or
    (None, why) when the base is no commit, a revision is no commit here, or the
    revisions do not merge. A revision already in what is merged so far adds
    nothing; one that contains it all is taken as it is (no merge commit). A
    dependency with no revision (built without ``--worktree``) has nothing to add.
    The merges are made without a working tree (``git merge-tree --write-tree``)."""
    want = base or "HEAD"
    cur = _commit(repo, want)
    if cur is None:
        return None, f"the queue's base {want!r} is not a commit in {repo}"
    merged: list[str] = []
    for dep, rev in deps:
        if not rev:
            continue
        full = _commit(repo, rev)
        if full is None:
            return None, f"dependency {dep}'s revision {rev} is not a commit in {repo}"
        if _ancestor(repo, full, cur):
            continue
        if _ancestor(repo, cur, full):
            cur = full
            merged.append(dep)
            continue
        res = _git(repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", cur, full)
        lines = res.stdout.split("\n")
        if res.returncode != 0:
            files = [ln for ln in lines[1:] if ln.strip()]
            onto = f"{want} ({cur[:12]})" + (f" with {', '.join(merged)}" if merged else "")
            why = f"its dependencies' revisions do not merge: {dep}'s {full[:12]} onto {onto}" + (
                f" conflicts in {', '.join(files[:10])}" if files else f": {res.stderr.strip()}"
            )
            return None, why
        msg = f"orcr tasks: {tid} starts from {dep} ({full[:12]}) merged onto {want}"
        made = subprocess.run(
            ["git", "-C", repo, "commit-tree", lines[0].strip(), "-p", cur, "-p", full, "-m", msg],
            capture_output=True, text=True, timeout=60, env={**os.environ, **MERGER},
        )  # fmt: skip
        if made.returncode != 0:
            return None, f"merging {dep}'s {full[:12]} failed: {made.stderr.strip()}"
        cur = made.stdout.strip()
        merged.append(dep)
    return cur, None


def landed(repo: str, base: str | None, revisions: list[str | None]) -> bool:
    """Whether every revision is on ``base`` (else ``HEAD``): ``dependants = landed``."""
    tip = _commit(repo, base or "HEAD")
    if tip is None:
        return False
    for rev in revisions:
        if not rev:
            continue  # nothing recorded to land
        full = _commit(repo, rev)
        if full is None or not _ancestor(repo, full, tip):
            return False
    return True


def start_options(queue, task, cwd: str | None, opts: dict) -> str | None:
    """A builder's checkout starts from the queue's ``base`` with its dependencies'
    verified revisions merged on (:func:`start_commit`): set ``opts["base"]`` to that
    commit. Returns why it cannot start (the task is then refused, not built);
    without a base setting or dependencies, orcr's default (``HEAD``) stays."""
    conf = queue.settings()
    deps = [
        (d, queue.read(queue.moves.verified_in(d), d).meta.get("revision")) for d in task.depends_on
    ]
    if not deps and not conf.get("base"):
        return None
    cwd = cwd or os.getcwd()
    repo = repo_root(cwd)
    if repo is None:
        return f"{cwd} is in no git repository, so no dependency can be merged in"
    start, why = start_commit(repo, conf.get("base"), deps, task.id)
    if why:
        return (
            f"{why}. Merge them onto the base by hand (or land them), then `orcr tasks "
            f"answer {task.id} TEXT` builds it again: not an attempt"
        )
    opts["base"] = start
    return None


def settled(orcr, uuid: str, wait: float = 30.0) -> dict | None:
    """The agent's checkout once orcr has kept or removed it (its agent ended)."""
    deadline = time.monotonic() + wait
    while True:
        wt = orcr.get(uuid).get("worktree")
        if wt is None or wt.get("state") in ("kept", "removed") or time.monotonic() > deadline:
            return wt
        time.sleep(0.2)


def branch_note(orcr, uuid: str) -> str:
    """What a failed attempt's section records of its branch once orcr has kept or
    removed its checkout: the branch and how many commits it made there, if any."""
    wt = settled(orcr, uuid)
    if not wt or wt.get("state") != "kept" or not wt.get("branch"):
        return ""
    span = f"{wt.get('base_commit')}..refs/heads/{wt['branch']}"
    res = _git(wt["repo"], "rev-list", "--count", span)
    n = int(res.stdout.strip()) if res.returncode == 0 and res.stdout.strip().isdigit() else 0
    if not n:
        return ""
    return f"\n\nbranch: {wt['branch']} keeps its {n} commit{'s' if n != 1 else ''}"


def drop_checkout(orcr, uuid: str) -> str:
    """Once the agent ended: its checkout goes (files discarded; a branch with commits
    on no other branch stays, orcr never drops one)."""
    wt = settled(orcr, uuid)
    if wt is None or wt.get("state") != "kept":
        return (wt or {}).get("state") or "none"
    orcr.remove_worktree(uuid, force=True)
    return "removed"
