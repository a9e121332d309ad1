"""A dialog never eats a prompt, with the real Codex (issue 14 item 2).

The ``real`` fixture trusts its project folder up front; these tests start agents in a
fresh folder neither CLI has been told to trust (a new worktree, the usual case), so
the real folder-trust question shows before the input.
"""

from __future__ import annotations

import subprocess

import pytest
from fake_models import Script

BOTH = pytest.mark.parametrize("live", ["tmux", "herdr"], indirect=True)


def _fresh(real, git: bool = False):
    cwd = real.tmp / "fresh-worktree"
    cwd.mkdir()
    if git:
        subprocess.run(["git", "init", "-q", str(cwd)], check=True)
    return cwd


def _run(real, path: str, cwd, prompt: str) -> str:
    r = real.orcr("agent", "run", "--provider", real.provider, "--path", path,
                  "--cwd", str(cwd), prompt)  # fmt: skip
    return r.stdout.split()[1]


def _blocked(real, path: str, what: str) -> dict:
    from orcr_core.testing import until

    return until(
        lambda: (a := real.get(path))["blocked"] and what in a["blocked"] and a,
        90,
        f"{path} blocked on {what!r}",
    )


@BOTH
def test_codex_trust_prompt_in_a_git_repository(real):
    """Codex asks about an unknown git repository after its composer is first drawn;
    orcr waits for it, then the prompt goes once."""
    real.codex(Script({"codex hello": "Hi from Codex"}))
    cwd = _fresh(real, git=True)
    _run(real, "x/fresh", cwd, "codex hello")
    a = _blocked(real, "x/fresh", f"Codex asks whether to trust {cwd}")
    assert a["status"] == "starting"
    assert real.model.prompts() == []
    real.orcr("agent", "send", "x/fresh", "--key", "enter")
    real.wait_idle("x/fresh", timeout=90)
    assert real.read("x/fresh")["text"] == "Hi from Codex", real.why("x/fresh")
    assert real.model.prompts() == ["codex hello"]


@BOTH
def test_codex_trust_cwd_answers_it(real):
    real.codex(Script({"trusted": "Codex trusted it"}), extra="trust_cwd = true\n")
    cwd = _fresh(real, git=True)
    _run(real, "x/auto", cwd, "trusted run")
    real.wait_idle("x/auto", timeout=90)
    assert real.read("x/auto")["text"] == "Codex trusted it", real.why("x/auto")
    assert real.model.prompts() == ["trusted run"]
    assert f'[projects."{cwd}"]' in (real.cli_home / "config.toml").read_text()
