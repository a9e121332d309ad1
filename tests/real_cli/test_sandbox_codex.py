"""Codex in a sandboxed agent (docs/sandbox.md, issue 36 item 7): it answers through
orcr's allowlist proxy to the fake model API, orcr follows its turns from the rollout it
writes in its (bound) CODEX_HOME, and its shell call writing outside its cwd is
refused. Codex's own sandbox is off (``danger-full-access``): orcr's is the one tested.

Planted: the system bound read-write (``--bind / /`` for ``--ro-bind / /`` in
``bwrap.argv``) -> the file outside is written and the test fails (2026-12-06)."""

from __future__ import annotations

import pytest
from real_cli import scenarios

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@TMUX
def test_sandboxed_codex_answers_and_is_confined(real):
    config = 'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
    scenarios.sandboxed_turns(
        real,
        lambda script, extra: real.codex(script, extra=extra, config=config),
        pass_env=("FAKE_MODEL_API_KEY",),
    )
