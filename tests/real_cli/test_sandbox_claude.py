"""Claude Code in a sandboxed agent (docs/sandbox.md, issue 36 item 7): it answers
through orcr's allowlist proxy to the fake model API, orcr follows its turns from the
transcript it writes in its (bound) config dir, and its Bash call writing outside its
cwd is refused.

Planted: the provider's state paths not bound writable (``*state`` left out of
``write`` in ``wrap``) -> Claude Code cannot write its config and exits at start (it
says it "might not be available in your country"): the test fails (2026-12-06)."""

from __future__ import annotations

import pytest
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_sandboxed_claude_answers_and_is_confined(real):
    settings = {
        "permissions": {"defaultMode": "default", "allow": ["Bash"]},
        "disableAutoMode": "disable",
    }
    scenarios.sandboxed_turns(
        real,
        lambda script, extra: real.claude(script, extra=extra, settings=settings),
        pass_env=("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"),
    )
