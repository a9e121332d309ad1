"""``orcr worktree prune`` (issue 33 item 5): kept checkouts of ended agents whose work is
on their branch go; their branch stays while it holds commits on no other branch and
goes once they are merged. Real git, real tmux, the echo agent."""

from __future__ import annotations

import json
from pathlib import Path

import test_worktrees
from test_worktrees import git, idle, make_repo, run_wt, settled

tmux = test_worktrees.tmux  # the fixture: orcr on a real tmux, checkouts under short_tmp


def commit(ws: str, name: str) -> str:
    (Path(ws) / name).write_text(name)
    git(ws, "add", name)
    git(ws, "-c", "user.email=t@x", "-c", "user.name=t", "commit", "-q", "-m", name)
    return git(ws, "rev-parse", "HEAD")


def test_prune_removes_checkouts_whose_work_is_recorded_or_merged(tmux, short_tmp):
    """Planted: prune refusing commits too (remove_kept's full reason) -> 'recorded' is
    left, fails; prune ignoring changed files -> 'dirty' is removed, fails; --dry-run
    removing -> the checkouts are gone after the dry run, fails."""
    repo = make_repo(short_tmp)
    tmux.start_server()
    paths = ("p/recorded", "p/merged", "p/dirty", "p/live")
    for p in paths:
        run_wt(tmux, repo, p)
    ws = {p: idle(tmux, p)["worktree"]["path"] for p in paths}
    recorded = commit(ws["p/recorded"], "r.txt")
    commit(ws["p/merged"], "m.txt")
    commit(ws["p/live"], "l.txt")
    (Path(ws["p/dirty"]) / "scratch.txt").write_text("not committed\n")
    for p in ("p/recorded", "p/merged", "p/dirty"):
        tmux.run("agent", "kill", p, check=True)
        assert settled(tmux, p)["worktree"]["state"] == "kept"
    git(repo, "merge", "-q", "--ff-only", "orcr/p/merged")  # merged after it was kept

    dry = tmux.run("worktree", "prune", "--dry-run", check=True).stdout
    assert f"would remove {ws['p/recorded']} (p/recorded): branch orcr/p/recorded stays" in dry
    assert f"would remove {ws['p/merged']} (p/merged): branch orcr/p/merged goes" in dry
    assert f"left {ws['p/dirty']} (p/dirty)" in dry and "1 changed or untracked file" in dry
    assert "p/live" not in dry, dry
    assert all(Path(w).is_dir() for w in ws.values())  # a dry run changes nothing
    assert tmux.get("p/recorded")["worktree"]["state"] == "kept"

    res = json.loads(tmux.run("worktree", "prune", "--json", check=True).stdout)
    assert sorted(w["path"] for w in res["pruned"]) == ["p/merged", "p/recorded"], res
    assert [w["path"] for w in res["left"]] == ["p/dirty"], res
    assert not Path(ws["p/recorded"]).exists() and not Path(ws["p/merged"]).exists()
    assert git(repo, "rev-parse", "orcr/p/recorded") == recorded  # its work stays recorded
    assert git(repo, "branch", "--list", "orcr/p/merged") == ""  # merged: nothing lost
    assert Path(ws["p/dirty"], "scratch.txt").is_file() and Path(ws["p/live"]).is_dir()
    for p in ("p/recorded", "p/merged"):
        wt = tmux.get(p)["worktree"]
        assert wt["state"] == "removed" and wt["reason"].startswith("pruned"), wt
    assert tmux.get("p/live")["worktree"]["state"] == "created"
    again = tmux.run("worktree", "prune", check=True).stdout
    assert "removed" not in again and f"left {ws['p/dirty']}" in again, again
