"""git and jj behind one interface: find the repository, make a checkout, say
what one holds, remove it.

Finding the repository is a walk up the directory tree (no subprocess: admission
uses it). Everything that changes the repository runs under :func:`repo_lock`,
an ``flock`` per repository shared by every orcr process: ten agents started at
once from one repository make their ten checkouts one after another instead of
racing for ``.git/worktrees`` and ref locks (issue 22 item 6).

The jj backend follows jj's documented commands (``jj workspace add``,
``workspace forget``, revsets); no jj binary is packaged where this project's
tests run, so its tests skip without ``jj`` on PATH (docs/decisions.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from orcr_core import dirs

GIT_TIMEOUT = 120.0  # seconds for one git or jj command (a checkout of a big tree)


class VcsError(Exception):
    """A git or jj command failed or refused; the message says which and why."""

    def __init__(self, message: str, code: str = "worktree_failed"):
        super().__init__(message)
        self.code = code


@dataclass
class Holdings:
    """What a checkout holds that would be lost with it."""

    changed: list[str] = field(default_factory=list)  # uncommitted or untracked files
    commits: list[str] = field(default_factory=list)  # commits on no other branch

    def reason(self, branch: str | None) -> str | None:
        """Why the checkout must be kept, or None when it holds nothing new."""
        why = []
        if self.changed:
            n = len(self.changed)
            why.append(f"{n} changed or untracked file{'s' if n != 1 else ''}")
        if self.commits:
            n = len(self.commits)
            where = f" on {branch}" if branch else ""
            why.append(f"{n} commit{'s' if n != 1 else ''}{where} not on any other branch")
        return "; ".join(why) or None


def _run(argv: list[str], cwd: str | Path, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    try:
        res = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=GIT_TIMEOUT
        )
    except FileNotFoundError:
        raise VcsError(f"{argv[0]} is not installed (not found on PATH)", "vcs_missing") from None
    except subprocess.TimeoutExpired:
        raise VcsError(f"{' '.join(argv[:3])} took over {GIT_TIMEOUT:g}s") from None
    if check and res.returncode != 0:
        err = (res.stderr or res.stdout).strip().splitlines()
        raise VcsError(f"{' '.join(argv[:3])}: {err[-1] if err else f'exit {res.returncode}'}")
    return res


@contextlib.contextmanager
def repo_lock(key: str):
    """Serialise changes to one repository across threads and orcr processes."""
    locks = dirs.data_dir() / "worktrees" / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha1(key.encode()).hexdigest()[:16] + ".lock"
    fd = os.open(locks / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class Git:
    kind = "git"
    default_base = "HEAD"

    def lock_key(self, root: str) -> str:
        out = _run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], root)
        return out.stdout.strip()

    def resolve(self, root: str, base: str) -> str:
        res = _run(["git", "rev-parse", "--verify", "--quiet", base + "^{commit}"], root, False)
        if res.returncode != 0:
            raise VcsError(
                f"base {base!r} is not a commit in {root} (give --base a branch, tag or commit)",
                "bad_base",
            )
        return res.stdout.strip()

    def check_branch(self, root: str, branch: str) -> str | None:
        """Why ``branch`` cannot be made (None: it can)."""
        if _run(["git", "check-ref-format", "--branch", branch], root, False).returncode:
            return f"{branch!r} is not a valid git branch name"
        if self.branch_tip(root, branch) is not None:
            return f"branch {branch!r} already exists in {root}; give another --branch"
        return None

    def branch_tip(self, root: str, branch: str) -> str | None:
        res = _run(["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], root, False)
        return res.stdout.strip() if res.returncode == 0 else None

    def create(self, root: str, dest: str, branch: str, base: str, existing: bool = False) -> None:
        """A new checkout on the new ``branch`` at ``base`` (``existing``: on that branch)."""
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        if existing:
            _run(["git", "worktree", "add", "--quiet", dest, branch], root)
        else:
            _run(["git", "worktree", "add", "--quiet", "-b", branch, dest, base], root)

    def registered(self, root: str, dest: str) -> bool:
        out = _run(["git", "worktree", "list", "--porcelain"], root).stdout
        want = os.path.realpath(dest)
        return any(
            os.path.realpath(line[9:]) == want
            for line in out.splitlines()
            if line.startswith("worktree ")
        )

    def holdings(self, root: str, dest: str, branch: str | None) -> Holdings:
        held = Holdings()
        status = _run(["git", "status", "--porcelain", "--untracked-files=all"], dest)
        held.changed = [ln[3:] for ln in status.stdout.splitlines() if ln.strip()]
        head = _run(["git", "rev-parse", "-q", "--verify", "HEAD"], dest, check=False)
        heads = ["HEAD"] if head.returncode == 0 else []
        if branch and self.branch_tip(root, branch):
            heads.append(f"refs/heads/{branch}")
        # --exclude patterns of --branches name branches without refs/heads/
        exclude = [f"--exclude={branch}"] if branch else []
        res = _run(
            ["git", "rev-list", *heads, "--not", *exclude, "--branches", "--tags", "--remotes"],
            dest,
            check=False,
        )
        held.commits = res.stdout.split() if res.returncode == 0 else []
        return held

    def remove(self, root: str, dest: str, branch: str | None, tip: str | None) -> None:
        """Remove a checkout that holds nothing new, then its branch if still at ``tip``."""
        if self.registered(root, dest):
            _run(["git", "worktree", "remove", dest], root)  # no --force: refuses changes
        elif os.path.isdir(dest):
            shutil.rmtree(dest)
        _run(["git", "worktree", "prune"], root, check=False)
        if branch and tip:
            # deleted only if it still points where it did when it was found empty
            _run(["git", "update-ref", "-d", f"refs/heads/{branch}", tip], root, check=False)

    def discard(self, root: str, dest: str, branch: str | None, base: str | None) -> None:
        """A checkout whose making was interrupted (no agent ever ran in it)."""
        if self.registered(root, dest):
            _run(["git", "worktree", "remove", "--force", "--force", dest], root, check=False)
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        _run(["git", "worktree", "prune"], root, check=False)
        if branch and base:
            _run(["git", "update-ref", "-d", f"refs/heads/{branch}", base], root, check=False)


class Jj:
    """jj workspaces: ``branch`` is the workspace's name (jj bookmarks do not follow
    new commits, so none is made)."""

    kind = "jj"
    default_base = "@"

    def lock_key(self, root: str) -> str:
        return os.path.realpath(os.path.join(root, ".jj"))

    def resolve(self, root: str, base: str) -> str:
        res = _run(["jj", "log", "--no-graph", "-r", base, "-T", "commit_id"], root, False)
        ids = res.stdout.split()
        if res.returncode != 0 or len(ids) != 1:
            raise VcsError(f"base {base!r} is not one revision in {root}", "bad_base")
        return ids[0]

    def check_branch(self, root: str, branch: str) -> str | None:
        names = _run(["jj", "workspace", "list", "-T", 'name ++ "\\n"'], root, False).stdout
        if branch in names.split():
            return f"jj workspace {branch!r} already exists in {root}; give another --branch"
        return None

    def branch_tip(self, root: str, branch: str) -> str | None:
        return None

    def create(self, root: str, dest: str, branch: str, base: str, existing: bool = False) -> None:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        _run(["jj", "workspace", "add", "--name", branch, "-r", base, dest], root)

    def registered(self, root: str, dest: str) -> bool:
        return os.path.isdir(os.path.join(dest, ".jj"))

    def holdings(self, root: str, dest: str, branch: str | None) -> Holdings:
        held = Holdings()
        diff = _run(["jj", "diff", "--summary", "-r", "@"], dest)
        held.changed = [ln[2:] for ln in diff.stdout.splitlines() if ln.strip()]
        revs = "(::@ ~ ::(bookmarks() | remote_bookmarks() | tags())) ~ @ ~ empty() ~ root()"
        out = _run(["jj", "log", "--no-graph", "-r", revs, "-T", 'commit_id ++ "\\n"'], dest)
        held.commits = out.stdout.split()
        return held

    def remove(self, root: str, dest: str, branch: str | None, tip: str | None) -> None:
        if branch:
            _run(["jj", "workspace", "forget", branch], root, check=False)
        if os.path.isdir(dest):
            shutil.rmtree(dest)

    def discard(self, root: str, dest: str, branch: str | None, base: str | None) -> None:
        self.remove(root, dest, branch, None)


BACKENDS = {"git": Git(), "jj": Jj()}


def find(cwd: str) -> tuple[str, str] | None:
    """(kind, repository root) of the checkout ``cwd`` is in, or None; a jj repo
    (colocated with git or not) is jj. A directory walk, no subprocess."""
    here = Path(cwd).resolve()
    for d in (here, *here.parents):
        if (d / ".jj").is_dir():
            return "jj", str(d)
        if (d / ".git").exists():
            return "git", str(d)
    return None
