"""The agent's argv and env: identity variables, provider variables, unset ones via env -u."""

from __future__ import annotations

import subprocess

from orcr_core.agents.launch import launch_command
from orcr_core.contracts import LaunchSpec
from orcr_core.store.models import Agent


class _P:
    def __init__(self, env):
        self._env = env

    def launch_argv(self, spec):
        return ["prog", "a b", "$HOME"]

    def launch_env(self, spec):
        return self._env


def _spec():
    return LaunchSpec(uuid="u1", path="a/b", cwd="/", data_dir="/tmp", options={})


def _agent():
    return Agent(uuid="u1", path="a/b", launch_token="tok")


def test_identity_env_and_no_unset(monkeypatch, tmp_path):
    monkeypatch.setenv("ORCR_HOME", str(tmp_path))
    monkeypatch.delenv("ORCR_SOCKET", raising=False)
    argv, env = launch_command(_P({"X": "1", "ORCR_PATH": "evil"}), _spec(), _agent())
    assert argv == ["prog", "a b", "$HOME"]
    assert env == {
        "ORCR_ID": "u1",
        "ORCR_PATH": "a/b",
        "ORCR_LAUNCH_TOKEN": "tok",
        "ORCR_SOCKET": str(tmp_path / "run" / "orcr.sock"),  # nested orcr calls reach this server
        "X": "1",
    }


def test_unset_variables_really_disappear():
    argv, env = launch_command(_P({"CLAUDECODE": None}), _spec(), _agent())
    assert argv[:4] == ["env", "-u", "CLAUDECODE", "--"]
    argv[4:] = ["sh", "-c", 'echo "${CLAUDECODE-unset}"']
    out = subprocess.run(
        argv, env={"CLAUDECODE": "1", "PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert out.stdout.strip() == "unset"


def test_claude_and_codex_drop_nested_session_markers():
    from orcr_claude import ClaudeProvider
    from orcr_codex.provider import CodexProvider

    assert ClaudeProvider().launch_env(_spec())["CLAUDECODE"] is None
    assert CodexProvider().launch_env(_spec()) == {"CODEX_THREAD_ID": None}


def test_a_rows_pane_reference_carries_the_marks_a_close_checks(monkeypatch, tmp_path):
    """Every close orcr makes of a row's pane (kill, guard, cancel, failed start)
    goes through pane_of: it must name this instance and the row's launch token,
    so a driver never closes another instance's pane that took over the id."""
    from orcr_core import dirs
    from orcr_core.agents.launch import owned, pane_of
    from orcr_core.contracts import PaneInfo

    monkeypatch.setenv("ORCR_HOME", str(tmp_path))
    agent = Agent(uuid="u1", path="a/b", launch_token="tok", pane_id="%3", tab_id="@2")
    ref = pane_of(agent)
    assert (ref.pane_id, ref.instance, ref.launch_token) == ("%3", dirs.instance_id(), "tok")
    mine = PaneInfo("%3", "w", "@2", label="a/b", instance=dirs.instance_id(), launch_token="tok")
    theirs = PaneInfo("%4", "w", "@3", label="a/b", instance="other", launch_token="tok2")
    unmarked = PaneInfo("%5", "w", "@4", label="a/b")
    assert owned([mine, theirs, unmarked]) == {"tok": mine}
