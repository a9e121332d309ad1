"""The program an argv really runs, behind the env/nice prefixes orcr and drivers add."""

from __future__ import annotations

import os
import stat

from orcr_core.kit.argv import missing_program, program_of


def test_program_is_found_behind_env_and_nice_prefixes():
    path = "/bin"
    for argv, program in [
        (["claude", "--x"], "claude"),
        (["env", "-u", "CLAUDECODE", "-u", "X", "--", "claude", "-p"], "claude"),
        (["env", "--", "codex"], "codex"),
        (["env", "A=1", "B=2", "prog", "C=3"], "prog"),
        (["env", "-uX", "--unset=Y", "-i", "prog"], "prog"),
        (["nice", "-n", "0", "--", "prog"], "prog"),
        (["/usr/bin/env", "nice", "-n5", "env", "-u", "Z", "--", "deep"], "deep"),
        # the systemd ceilings' launch step (ceilings/systemd.py); planted: not skipped -> fails
        (["systemd-run", "--user", "--scope", "-p", "MemoryMax=1", "--", "claude"], "claude"),
    ]:
        assert program_of(argv, path, "/")[0] == program, argv
    assert program_of(["env"], path, "/") is None  # prints the environment: nothing to check
    assert program_of(["env", "--weird-option", "x"], path, "/") is None  # unknown: no guess


def test_path_and_cwd_changes_of_env_are_followed():
    assert program_of(["env", "PATH=/opt/x", "prog"], "/bin", "/")[1] == "/opt/x"
    assert program_of(["env", "-i", "prog"], "/bin", "/")[1] is None
    assert program_of(["env", "-C", "sub", "./prog"], "/bin", "/w")[2] == "/w/sub"


def test_missing_program_names_the_real_program(tmp_path):
    env = {"PATH": str(tmp_path)}
    wrapped = ["env", "-u", "CLAUDECODE", "--", "claude", "--session-id", "x"]
    # env itself exists everywhere; the check must not stop at argv[0]
    assert missing_program(wrapped, env, "/") == "claude: command not found"
    assert missing_program(["env", "--", "codex"], env, "/") == "codex: command not found"
    tool = tmp_path / "claude"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert missing_program(wrapped, env, "/") is None
    assert (
        missing_program(["./nope"], env, str(tmp_path)) == "./nope: no such file or not executable"
    )
    assert missing_program(["./claude"], env, str(tmp_path)) is None
    # the pane's PATH is orcr's own unless the spec gives one
    assert missing_program(["sh", "-c", "exit 3"], {}, "/") is None
    assert os.environ.get("PATH")
