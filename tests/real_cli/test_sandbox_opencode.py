"""OpenCode in a sandboxed agent (docs/sandbox.md, issue 36 item 7): it answers through
orcr's allowlist proxy to the fake model API, orcr follows its turns from the database
in the agent's data dir, and its bash call writing outside its cwd is refused (allowed
once at OpenCode's own "external directory" question: the sandbox, not the CLI, says no).

Planted: OpenCode's ``sandbox_read`` dropped -> its ``opencode.json`` is hidden, it runs
on its default model and is refused opencode.ai:443 (seen, 2026-12-06)."""

from __future__ import annotations

import pytest
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)
pytestmark = pytest.mark.timeout(600)  # OpenCode draws nothing for a minute at load


@TMUX
def test_sandboxed_opencode_answers_and_is_confined(real):
    scenarios.sandboxed_turns(
        real,
        lambda script, extra: real.opencode(script, extra=extra),
        pass_env=("FAKE_MODEL_API_KEY", "OPENCODE_DISABLE_MODELS_FETCH"),
        approve="OpenCode asks for permission",  # its "external directory" question
    )
