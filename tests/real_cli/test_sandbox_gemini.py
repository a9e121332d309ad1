"""Gemini CLI in a sandboxed agent (docs/sandbox.md, issue 36 item 7): it answers
through orcr's allowlist proxy to the fake model API, orcr follows its turns from the
session file it writes under its (bound) home, and its shell call writing outside its
cwd is refused (approved at its permission question: the sandbox, not the CLI, says no)."""

from __future__ import annotations

import pytest
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_sandboxed_gemini_answers_and_is_confined(real):
    scenarios.sandboxed_turns(
        real,
        lambda script, extra: real.gemini(script, extra=extra),
        pass_env=("GOOGLE_GEMINI_BASE_URL", "CI"),
        approve="Allow execution of",
    )
