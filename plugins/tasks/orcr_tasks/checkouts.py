"""``orcr tasks work --worktree``: each attempt in a checkout of its own (issue 22 items 7, 8).

A builder's agent runs in an orcr checkout (``agent run --worktree``) of the
repository ``--cwd`` is in, on the branch ``tasks/<queue>/<task>/a<attempt>-<token>``;
its ``REVISION:`` must be a commit it made there (on that branch, not already in
its base), else the attempt fails. A verifier's agent runs in a fresh checkout
of that revision, on a throwaway branch, removed after the verdict (files the
verifier left are discarded; a commit it made stays on its branch: orcr never
drops one). A checkout that holds work (a done task's branch, a failed attempt's
commits) is kept by orcr when its agent ends: ``orcr worktree ls`` lists them,
``orcr worktree rm`` removes one.
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
    # read in the attempt's checkout while it exists (HEAD there is the builder's)
    here = worktree.get("path") if os.path.isdir(worktree.get("path") or "") else repo
    res = _git(here, "rev-parse", "--verify", "--quiet", revision + "^{commit}")
    if res.returncode != 0:
        return None, f"REVISION {revision} is not a commit in {repo}"
    full = res.stdout.strip()
    on_branch = _git(repo, "merge-base", "--is-ancestor", full, f"refs/heads/{br}").returncode == 0
    if not on_branch:
        return None, f"REVISION {revision} is not on the attempt's branch {br}"
    if base and _git(repo, "merge-base", "--is-ancestor", full, base).returncode == 0:
        return (
            None,
            f"REVISION {revision} was there before the attempt began (its base {base[:12]})",
        )
    return full, None


def settled(orcr, uuid: str, wait: float = 30.0) -> dict | None:
    """The agent's checkout once orcr has kept or removed it (its agent ended)."""
    deadline = time.monotonic() + wait
    while True:
        wt = orcr.get(uuid).get("worktree")
        if wt is None or wt.get("state") in ("kept", "removed") or time.monotonic() > deadline:
            return wt
        time.sleep(0.2)


def drop_verifier_checkout(orcr, uuid: str) -> str:
    """After the verdict: the verifier's checkout goes (its files discarded)."""
    wt = settled(orcr, uuid)
    if wt is None or wt.get("state") != "kept":
        return (wt or {}).get("state") or "none"
    orcr.remove_worktree(uuid, force=True)
    return "removed"
