"""README.md's command blocks run as written (issue 38 part 8): every ``sh`` block whose
lines are ``orcr`` commands runs in order in one fresh home on real tmux, each line
exiting 0, with the placeholders filled in (``<repo>``: a git repository, ``<https-url>``:
a webhook URL). The install blocks are the only ones not run here; they are named in
:data:`NOT_RUN` (the pipx line was run by hand from a clone: docs/internals.md).
docs/quickstart.md has its own test (test_quickstart.py), in a fresh home of its own."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from orcr_core.cli import cli

DOC = Path(__file__).resolve().parent.parent / "README.md"

#: blocks not run by this test, by their first words: installs, and the whole suite
NOT_RUN = ("git clone <repo-url> orcr", "python3 -m venv .venv")


def sh_blocks(text: str) -> list[list[str]]:
    return [body.splitlines() for body in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)]


def _fill(line: str, repo: Path) -> str:
    line = re.sub(r"\s+#.*$", "", line)  # a trailing comment
    line = line.replace("<repo>", str(repo)).replace("<https-url>", "https://example.test/hook")
    assert "<" not in line, f"README.md: a placeholder this test does not know in {line!r}"
    return line


def _path_without_agents() -> str:
    """tmux, git and sh, but no provider CLI: the claude line must not start a real one."""
    dirs = {os.path.dirname(shutil.which(p) or "") for p in ("tmux", "git", "sh")}
    dirs.discard("")
    return os.pathsep.join(d for d in sorted(dirs) if not os.path.exists(f"{d}/claude"))


def test_readme_blocks_run_in_order(orcr_home, short_tmp, monkeypatch):
    """Planted: README's old `orcr loop create nightly ... -- ./triage.sh` -> fails (the
    run's command does not exist: refused at create); `agent resume demo/hello` after the
    kill -> fails (an agent killed is not lost)."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed for the README test (apt-get install tmux)")
    sock = short_tmp / "tmux.sock"
    orcr_home.config(f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{sock}"\n')
    # in this process (a CLI process per line would cost ~0.5 s each); the server it
    # starts gets this environment: real plugins, and no provider CLI on the PATH
    env = {k: v for k, v in orcr_home.env.items() if k != "ORCR_PLUGIN_MODULES"}
    env["PATH"] = _path_without_agents()
    monkeypatch.delenv("ORCR_PLUGIN_MODULES", raising=False)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.chdir(short_tmp)
    repo = short_tmp / "repo"
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    ran = 0
    try:
        for block in sh_blocks(DOC.read_text()):
            if not block[0].startswith("orcr "):
                assert block[0].startswith(NOT_RUN), f"README.md: a block not run: {block[0]!r}"
                continue
            for line in block:
                for part in _fill(line, repo).split(" && "):
                    words = shlex.split(part)
                    assert words[0] == "orcr", f"README.md runs only orcr here: {part!r}"
                    r = CliRunner().invoke(cli, words[1:], catch_exceptions=False)
                    assert r.exit_code == 0, f"$ {part}\nexited {r.exit_code}: {r.output}"
                    ran += 1
        assert ran >= 20
    finally:
        subprocess.run([sys.executable, "-m", "orcr_core.cli", "server", "stop"], env=env,
                       capture_output=True, timeout=60)  # fmt: skip
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
