"""A dialog never eats a prompt, with the real Codex (issue 14 item 2).

The ``real`` fixture trusts its project folder up front; these tests start agents in a
fresh folder neither CLI has been told to trust (a new worktree, the usual case), so
the real folder-trust question shows before the input.
"""

from __future__ import annotations

import pytest
from fake_models import Script
from real_cli import scenarios

BOTH = pytest.mark.parametrize("live", ["tmux", "herdr"], indirect=True)


@BOTH
def test_codex_trust_prompt_in_a_git_repository(real):
    """Codex asks about an unknown git repository after its composer is first drawn;
    orcr waits for it, then the prompt goes once."""
    real.codex(Script({"codex hello": "Hi from Codex"}))
    cwd = scenarios.fresh_folder(real, git=True)
    real.run("x/fresh", "codex hello", cwd=cwd)
    a = real.until_blocked("x/fresh", f"Codex asks whether to trust {cwd}", timeout=90)
    assert a["status"] == "starting"
    assert real.model.prompts() == []
    real.orcr("agent", "send", "x/fresh", "--key", "enter")
    real.wait_idle("x/fresh", timeout=90)
    assert real.read("x/fresh")["text"] == "Hi from Codex", real.why("x/fresh")
    assert real.model.prompts() == ["codex hello"]


@BOTH
def test_codex_trust_cwd_answers_it(real):
    real.codex(Script({"trusted": "Codex trusted it"}), extra="trust_cwd = true\n")
    cwd = scenarios.fresh_folder(real, git=True)
    real.run("x/auto", "trusted run", cwd=cwd)
    real.wait_idle("x/auto", timeout=90)
    assert real.read("x/auto")["text"] == "Codex trusted it", real.why("x/auto")
    assert real.model.prompts() == ["trusted run"]
    assert f'[projects."{cwd}"]' in (real.cli_home / "config.toml").read_text()
