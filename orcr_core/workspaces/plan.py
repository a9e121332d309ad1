"""What admission records about an agent's checkout before anything is made.

Pure Python (a directory walk and a few ``stat`` calls): admission stays a
single quick transaction; the pipeline runs git or jj (:mod:`.step`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from orcr_core import dirs
from orcr_core.workspaces import vcs

#: worktree_state values: made or not yet made (the row must see to it), and ended
OPEN = ("requested", "created")
STATES = ("requested", "created", "kept", "removed")

_BAD_BRANCH = re.compile(r"(^[-/.])|(\.\.)|(//)|(@\{)|([\x00-\x20~^:?*\[\\\x7f])|([/.]$)|(\.lock$)")


class PlanError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def checkouts_dir(config) -> Path:
    """``worktrees.dir``, else ``<data dir>/worktrees`` (docs/decisions.md)."""
    where = config.get("worktrees.dir", "") if config is not None else ""
    return Path(os.path.expanduser(where)) if where else dirs.data_dir() / "worktrees"


def sync_folder(path: str) -> str | None:
    """Why ``path`` must not hold checkouts (inside a synced folder), or None."""
    service = dirs.synced_by(path)
    if service is None:
        return None
    return (
        f"{path} is inside a folder synced by {service}: a sync client rewrites and "
        "conflict-copies files under a running agent; set worktrees.dir elsewhere"
    )


def default_branch(agent_path: str) -> str:
    return "orcr/" + agent_path


def _git_common_dir(root: str) -> Path | None:
    dot = Path(root) / ".git"
    if dot.is_dir():
        return dot
    try:
        line = dot.read_text().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(root, line[7:].strip())
    common = gitdir / "commondir"
    return Path(gitdir, common.read_text().strip()) if common.is_file() else gitdir


def git_branch_exists(root: str, branch: str) -> bool:
    """A loose or packed ``refs/heads/<branch>``, read from the files (no git call)."""
    common = _git_common_dir(root)
    if common is None:
        return False
    if (common / "refs" / "heads" / branch).is_file():
        return True
    try:
        packed = (common / "packed-refs").read_text()
    except OSError:
        return False
    return f" refs/heads/{branch}\n" in packed + "\n"


def plan(
    cwd: str, agent_path: str, uuid: str, branch: str | None, base: str | None, config
) -> dict:
    """The checkout record of a new agent (``state: requested``); PlanError if it cannot work."""
    found = vcs.find(cwd)
    if found is None:
        raise PlanError(
            "not_a_repository",
            f"--worktree: {cwd} is not inside a git or jj repository; give a --cwd inside "
            "one, or leave --worktree out",
        )
    kind, root = found
    if branch is not None:
        if not branch.strip() or _BAD_BRANCH.search(branch):
            raise PlanError(
                "invalid_branch",
                f"--branch {branch!r} is not a valid branch name (no spaces, '..', '~^:?*[\\', "
                "leading '-', '/' or '.', trailing '/', '.' or '.lock')",
            )
        if kind == "git" and git_branch_exists(root, branch):
            raise PlanError(
                "branch_exists",
                f"--branch {branch!r} already exists in {root}; give a new branch name "
                "(the agent's checkout starts it), or leave --branch out for orcr/<path>",
            )
    if base is not None and not base.strip():
        raise PlanError("bad_base", "--base is empty; give a branch, tag or commit")
    where = checkouts_dir(config)
    if not where.is_absolute():
        raise PlanError("invalid_worktrees_dir", f"worktrees.dir {str(where)!r} is not absolute")
    why = sync_folder(str(where))
    if why:
        raise PlanError("sync_folder", why)
    real_root = os.path.realpath(root)
    real_where = os.path.realpath(where)
    if real_where == real_root or real_where.startswith(real_root + os.sep):
        raise PlanError(
            "worktrees_in_repo",
            f"worktrees.dir {str(where)!r} is inside the repository {root}: every checkout "
            "would show as untracked files there; set it outside the repository",
        )
    repo_id = hashlib.sha1(real_root.encode()).hexdigest()[:8]
    dest = where / f"{Path(root).name}-{repo_id}" / f"{agent_path.replace('/', '.')}-{uuid[:8]}"
    rel = os.path.relpath(os.path.realpath(cwd), real_root)
    return {
        "kind": kind,
        "repo": root,
        "path": str(dest),
        "cwd": os.path.normpath(os.path.join(dest, rel)),
        "source_cwd": cwd,
        "branch": branch,
        "branch_given": branch is not None,
        "base": base,
        "base_commit": None,
        "reason": None,
    }


def load(agent) -> dict | None:
    return json.loads(agent.worktree) if agent.worktree else None


def public(agent) -> dict | None:
    """The ``worktree`` of ``agent get`` / ``ls --json``."""
    wt = load(agent)
    if wt is None:
        return None
    keys = ("kind", "path", "branch", "base", "base_commit", "repo", "reason")
    return {**{k: wt.get(k) for k in keys}, "state": agent.worktree_state}
