"""The git side of landing: scratch checkouts, bringing a revision onto a tip, the
compare-and-swap of the branch, and the intent refs that make a killed lander's
ref update recoverable.

Git only: no jj binary can be installed where orcr is tested, so a jj repository
is refused (docs/decisions.md).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: where a lander's scratch checkouts are made; the name carries the queue, host and
#: pid, so a restarted lander removes those of a dead one
SCRATCH_PREFIX = "orcr-land-"


class GitError(Exception):
    """A git command failed in a way that is not the task's fault (no such branch...)."""


def git(repo: str | os.PathLike, *args: str, check: bool = True, env=None) -> str:
    r = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=None if env is None else {**os.environ, **env},
    )
    if check and r.returncode:
        raise GitError(f"git {' '.join(args)}: {(r.stderr or r.stdout).strip()}")
    return r.stdout.strip()


def ok(repo, *args: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True).returncode == 0


def commit_of(repo, rev: str) -> str | None:
    """The full id of the commit ``rev`` names, or None."""
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or None if out.returncode == 0 else None


def is_ancestor(repo, a: str, b: str) -> bool:
    return ok(repo, "merge-base", "--is-ancestor", a, b)


def repo_root(path: str) -> str:
    p = Path(path).expanduser()
    if (p / ".jj").exists() and not (p / ".git").exists():
        raise GitError(
            f"{path} is a jj repository without git: landing is git only (jj is untested "
            "here, docs/decisions.md); use a colocated repository (jj git init --colocate)"
        )
    root = subprocess.run(
        ["git", "-C", str(p), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if root.returncode:
        bare = git(p, "rev-parse", "--is-bare-repository", check=False)
        if bare == "true":
            return str(p.absolute())
        raise GitError(f"--repo {path} is not in a git repository")
    return root.stdout.strip()


def current_branch(repo: str) -> str:
    name = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if not name:
        raise GitError(f"{repo} has a detached HEAD: give the branch to land on with --onto")
    return name


def intent_ref(queue_name: str, task_id: str) -> str:
    """The ref a lander writes, before it moves the branch, naming the tested commit."""
    return f"refs/orcr/land/{queue_name}/{task_id}"


def identity_env(repo: str) -> dict | None:
    """A committer for the rebase or merge when the repository has none configured."""
    if git(repo, "config", "user.email", check=False):
        return None
    return {
        "GIT_COMMITTER_NAME": "orcr tasks land",
        "GIT_COMMITTER_EMAIL": "orcr@localhost",
        "GIT_AUTHOR_NAME": "orcr tasks land",
        "GIT_AUTHOR_EMAIL": "orcr@localhost",
    }


@dataclass
class Applied:
    commit: str | None  # the commit to check and land; None on a conflict
    conflicts: list[str]


class Scratch:
    """A detached checkout of ``tip``, outside the repository, removed by :meth:`remove`
    (or, when its lander was killed, by :func:`prune_scratches`)."""

    def __init__(self, repo: str, queue_name: str, tip: str):
        self.repo = repo
        tag = f"{SCRATCH_PREFIX}{queue_name}-{socket.gethostname()}-{os.getpid()}-"
        self.path = Path(tempfile.mkdtemp(prefix=tag + secrets.token_hex(3) + "-"))
        git(repo, "worktree", "add", "--detach", str(self.path), tip)

    def apply(self, revision: str, tip: str, strategy: str, message: str) -> Applied:
        """Bring ``revision`` onto ``tip``: a fast-forward when ``tip`` is already in it
        (the verified commit itself lands), else a rebase of its own commits or a merge."""
        env = identity_env(self.repo)
        if is_ancestor(self.repo, tip, revision):
            git(self.path, "checkout", "--quiet", "--detach", revision)
            return Applied(revision, [])
        if strategy == "merge":
            args = ["merge", "--no-ff", "--no-edit", "-m", message, revision]
            r = subprocess.run(
                ["git", "-C", str(self.path), *args],
                capture_output=True,
                text=True,
                env={**os.environ, **(env or {})},
            )
            abort = ["merge", "--abort"]
        else:
            base = git(self.repo, "merge-base", tip, revision)
            git(self.path, "checkout", "--quiet", "--detach", revision)
            r = subprocess.run(
                ["git", "-C", str(self.path), "rebase", "--onto", tip, base],
                capture_output=True,
                text=True,
                env={**os.environ, **(env or {})},
            )
            abort = ["rebase", "--abort"]
        if r.returncode == 0:
            return Applied(git(self.path, "rev-parse", "HEAD"), [])
        files = git(self.path, "diff", "--name-only", "--diff-filter=U", check=False).split()
        git(self.path, *abort, check=False)
        if not files:
            raise GitError(f"git {strategy} failed: {(r.stderr or r.stdout).strip()[-500:]}")
        return Applied(None, files)

    def remove(self) -> None:
        git(self.repo, "worktree", "remove", "--force", str(self.path), check=False)
        shutil.rmtree(self.path, ignore_errors=True)
        git(self.repo, "worktree", "prune", check=False)


def prune_scratches(repo: str, queue_name: str, alive) -> int:
    """Remove the scratch checkouts of this queue's landers on this host that are gone
    (``alive(pid)`` False): a lander SIGKILLed mid-land leaves its checkout behind."""
    removed = 0
    tag = f"{SCRATCH_PREFIX}{queue_name}-{socket.gethostname()}-"
    for line in git(repo, "worktree", "list", "--porcelain", check=False).splitlines():
        if not line.startswith("worktree "):
            continue
        path = line[len("worktree ") :]
        name = Path(path).name
        if not name.startswith(tag):
            continue
        pid = name[len(tag) :].split("-")[0]
        if pid.isdigit() and not alive(int(pid)):
            git(repo, "worktree", "remove", "--force", path, check=False)
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    if removed:
        git(repo, "worktree", "prune", check=False)
    return removed


def compare_and_swap(repo: str, branch: str, new: str, old: str) -> bool:
    """Move ``refs/heads/branch`` to ``new`` only if it still points at ``old``."""
    return ok(repo, "update-ref", "-m", "orcr tasks land", f"refs/heads/{branch}", new, old)


def sync_checkout(repo: str, branch: str, old: str, new: str) -> str | None:
    """When ``branch`` is checked out in ``repo`` itself, bring its working tree from
    ``old`` to ``new`` (a two-tree merge that keeps local changes, as a fast-forward
    would); a note when it could not."""
    if git(repo, "symbolic-ref", "--quiet", "HEAD", check=False) != f"refs/heads/{branch}":
        return None
    if git(repo, "rev-parse", "--is-bare-repository", check=False) == "true":
        return None
    r = subprocess.run(
        ["git", "-C", repo, "read-tree", "-m", "-u", old, new], capture_output=True, text=True
    )
    if r.returncode:
        return (
            f"the checkout in {repo} was left as it was ({r.stderr.strip()}): git status shows it"
        )
    return None
