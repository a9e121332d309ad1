"""``agent run --worktree --base REV`` and ``--branch NAME`` in the core's own tests
(issue 33 item 20): a valid base and a given branch are used, not the defaults (HEAD,
``orcr/<path>``). Real git, real tmux, the echo agent; the fixture and helpers are
``tests/test_worktrees.py``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_worktrees import git, idle, kinds, make_repo, run_wt
from test_worktrees import tmux as tmux  # noqa: F401  (the fixture, used through ``home``)


@pytest.fixture
def home(tmux):
    """orcr on a real tmux, checkouts under the test's folder (``test_worktrees.tmux``)."""
    return tmux


def _two_commits(root: Path) -> tuple[Path, str, str]:
    """A repository whose HEAD (main) is one commit past ``old``: (repo, old, head)."""
    repo = make_repo(root)
    git(repo, "branch", "old")
    old = git(repo, "rev-parse", "HEAD")
    (repo / "sub" / "a.txt").write_text("b\n")
    git(repo, "commit", "-q", "-am", "second")
    return repo, old, git(repo, "rev-parse", "HEAD")


def test_base_starts_the_checkout_at_that_revision_not_head(home, short_tmp):
    """``--base`` as a commit id and as a branch name: the checkout, its branch and the
    recorded ``base_commit`` are at that revision, the file as it was there. Planted:
    ``--base`` ignored (the checkout starts at HEAD) -> fails."""
    repo, old, head = _two_commits(short_tmp)
    home.start_server()
    run_wt(home, repo, "b/sha", "--base", old[:10])
    run_wt(home, repo / "sub", "b/name", "--base", "old")
    for path in ("b/sha", "b/name"):
        wt = idle(home, path)["worktree"]
        assert wt["base_commit"] == old != head, wt
        assert git(wt["path"], "rev-parse", "HEAD") == old
        assert git(repo, "rev-parse", wt["branch"]) == old
        assert (Path(wt["path"]) / "sub" / "a.txt").read_text() == "a\n"
    assert git(repo, "rev-parse", "HEAD") == head  # the repository's own checkout stays


def test_branch_names_the_checkouts_branch(home, short_tmp):
    """``--branch feature/x`` (with and without ``--base``): the checkout is on that
    branch, the row and the events record it, and no ``orcr/<path>`` branch is made.
    Planted: ``--branch`` ignored (the default ``orcr/<path>``) -> fails."""
    repo, old, head = _two_commits(short_tmp)
    home.start_server()
    out = run_wt(home, repo, "r/x", "--branch", "feature/x").stdout.split()
    run_wt(home, repo, "r/y", "--branch", "feature/y", "--base", "old")
    for path, branch, at in (("r/x", "feature/x", head), ("r/y", "feature/y", old)):
        wt = idle(home, path)["worktree"]
        assert (wt["branch"], wt["base_commit"]) == (branch, at), wt
        assert git(wt["path"], "branch", "--show-current") == branch
        assert git(repo, "rev-parse", branch) == at
    assert git(repo, "branch", "--list", "orcr/*") == ""
    requested = [e for e in home.events(out[1]) if e["kind"] == "worktree.requested"]
    assert [e["data"]["branch"] for e in requested] == ["feature/x"]
    assert kinds(home, out[1]) == ["worktree.requested", "worktree.created"]
