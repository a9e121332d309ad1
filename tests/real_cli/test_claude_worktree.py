"""The real Claude Code in a checkout orcr just made (issue 22 item 5): with
``trust_cwd = true`` the checkout is recorded as trusted before the CLI starts, so
no trust dialog shows and the first prompt reaches the model once."""

from __future__ import annotations

import subprocess

import pytest
from fake_models import Script

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_claude_in_a_fresh_worktree_gets_its_first_prompt(real):
    real.claude(Script({"hello": "Hi from a worktree"}), extra="trust_cwd = true\n")
    repo = real.tmp / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README").write_text("x\n")
    for args in (["add", "."], ["-c", "user.email=t@x", "-c", "user.name=t", "commit", "-qm", "1"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    r = real.orcr("agent", "run", "--provider", real.provider, "--path", "c/wt",
                  "--cwd", str(repo), "--worktree", "hello from a worktree")  # fmt: skip
    uuid = r.stdout.split()[1]
    real.wait_idle("c/wt", timeout=90)
    assert real.read("c/wt")["text"] == "Hi from a worktree", real.why("c/wt")
    assert real.model.prompts() == ["hello from a worktree"]
    kinds = [e["kind"] for e in real.home.events(uuid)]
    assert kinds.count("worktree.trusted") == 1, kinds
    assert "agent.dialog_answered" not in kinds and "agent.blocked" not in kinds, kinds
    assert kinds.count("prompt.requested") == 1
