"""pi in a sandboxed agent (docs/sandbox.md, issue 36 item 7): it answers through orcr's
allowlist proxy to the fake model API, orcr follows its turns from the session file in
the agent's data dir, and its bash call writing outside its cwd is refused."""

from __future__ import annotations

import pytest
from fake_models import Tool
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_sandboxed_pi_answers_and_is_confined(real):
    scenarios.sandboxed_turns(
        real,
        lambda script, extra: real.pi(script, extra=extra),
        pass_env=("FAKE_MODEL_API_KEY", "PI_OFFLINE"),
        tool=lambda command: Tool("bash", {"command": command}),
    )
