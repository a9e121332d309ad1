"""Claude Code in a sandboxed agent (docs/sandbox.md, issue 36 item 7): it answers
through orcr's allowlist proxy to the fake model API, orcr follows its turns from the
transcript it writes in its (bound) config dir, and its Bash call writing outside its
cwd is refused; the same call's read of a planted ``~/.ssh`` key and ``curl`` to a
loopback port not allowed are refused and it goes on; resumed, it is sandboxed again in
the same conversation (``scenarios.sandboxed_turns``).

Planted (2026-12-07): ``~/.ssh`` dropped from ``DENY_ALWAYS`` -> the key reaches the
fake model, fails; the proxy's ``allowed`` ignoring the port -> the listener is
connected to, fails.
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
