"""Every hold explained (issue 38 part 2): a queued row waiting on a cap says which
(``queued (held: cap echo 3/3)``) in ``agent ls``, ``agent get``, ``top`` and the JSON;
an ended failed row says why in ``agent ls``; admitting an agent whose provider's CLI
is missing warns at once and admits all the same.
"""

from __future__ import annotations

import json
import os

import pytest

from orcr_core.cli.agent_show import ended_reason
from orcr_core.kit.testing import until


def _status_cells(home, *args) -> dict[str, str]:
    """PATH -> its STATUS cell in ``agent ls`` (columns are two spaces apart)."""
    out = home.run("agent", "ls", *args, check=True).stdout.splitlines()
    cells = {}
    for line in out[1:]:
        parts = [p for p in line.split("  ") if p.strip()]
        cells[parts[0].strip()] = parts[1].strip()
    return cells


def test_a_row_held_by_a_cap_says_which(orcr_home):
    """Caps of 2 global and 1 testq: q/two waits on testq's cap, p/two on the global one.

    Planted: cap_held not called in handlers._mark_held -> fails (bare ``queued``).
    Planted: the top model's _mark_held left out of groups() -> fails (top's line)."""
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmax = 2\ntestq = 1\n')
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        o.run("x", provider="testq", path="q/one", cwd="/")
        o.run("x", provider="testq", path="q/two", cwd="/")
        until(lambda: o.get("q/one")["status"] == "working", 10, "q/one to work")
        assert o.get("q/two")["held"] == "cap testq 1/1"
        o.run("x", provider="testp", path="p/one", cwd="/")
        until(lambda: o.get("p/one")["status"] == "working", 10, "p/one to work")
        o.run("x", provider="testp", path="p/two", cwd="/")
        assert o.get("p/two")["held"] == "cap global 2/2"
        assert o.get("q/two")["held"] == "cap global 2/2"  # the global cap is checked first
    cells = _status_cells(orcr_home)
    assert cells["p/two"] == "queued (held: cap global 2/2)", cells
    assert cells["p/one"] == "working"
    rows = json.loads(orcr_home.run("agent", "ls", "--json", check=True).stdout)
    assert {a["path"]: a.get("held") for a in rows}["p/two"] == "cap global 2/2"
    get = orcr_home.run("agent", "get", "p/two", check=True).stdout
    assert "status: queued (held: cap global 2/2)" in get
    top = orcr_home.run("top", "--once", check=True).stdout
    assert any("p/two" in ln and "queued (held: cap global 2/2)" in ln for ln in top.splitlines())
    frame = json.loads(orcr_home.run("top", "--once", "--json", check=True).stdout)
    agents = {a["path"]: a for g in frame["groups"] for a in g["agents"]}
    assert agents["p/two"]["held"] == "cap global 2/2" and agents["p/one"]["held"] is None
    orcr_home.run("agent", "kill", "p/one", check=True)  # the freed slot goes to p/two
    with orcr_home.sdk() as o:
        until(lambda: o.get("p/two")["status"] != "queued", 10, "p/two to start")
        o.kill("p/two")  # a global slot stays free: only testq's own cap holds q/two
        until(lambda: o.get("q/two").get("held") == "cap testq 1/1", 10, "testq's hold")
    assert _status_cells(orcr_home)["q/two"] == "queued (held: cap testq 1/1)"


def test_ended_reason_is_short():
    """Only failed and lost rows carry their error, first line, cut to the width."""
    a = {"exit_reason": "failed", "error": "claude: command not found\nmore"}
    assert ended_reason(a) == "failed: claude: command not found"
    assert ended_reason({"exit_reason": "killed", "error": "x"}) == "killed"
    assert ended_reason({"exit_reason": "lost", "error": None}) == "lost"
    long = ended_reason({"exit_reason": "lost", "error": "y" * 200}, width=20)
    assert long == "lost: " + "y" * 19 + "…"


def _path_without(*names: str) -> str:
    return os.pathsep.join(
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.access(os.path.join(d, n), os.X_OK) for n in names)
    )


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_missing_cli_warns_at_admission_and_ls_says_why_it_failed(live):
    """``agent run -p claude`` with no claude on the server's PATH warns on stderr and
    admits (exit 0); the start fails and ``agent ls --all`` says why.

    Planted: the handler's cli_check left out -> fails (no warning). Planted:
    agent_table without ended_reason -> fails (bare ``ended (failed)``)."""
    live.start_server(extra_env={"PATH": _path_without("claude", "codex")})
    res = live.run("agent", "run", "-p", "claude", "--path", "m/claude", "hi")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("m/claude ")
    assert "warning: 'claude' is not on the server's PATH" in res.stderr
    assert "npm install -g @anthropic-ai/claude-code" in res.stderr
    ok = live.run("agent", "run", "-p", "echo", "--path", "m/echo", "hi", check=True)
    assert "warning" not in ok.stderr  # echo has no CLI of its own to miss
    assert live.ended("m/claude")["error"] == "claude: command not found"
    cells = _status_cells(live, "--all")
    assert cells["m/claude"] == "ended (failed: claude: command not found)", cells


def test_a_cli_installed_after_a_warning_is_seen_at_the_next_admission(tmp_path, monkeypatch):
    """The admission's PATH lookup keeps only what it found (FOUND_FOR): a missing CLI
    is looked up again at every admission, so installing it silences the next one.
    Planted: misses cached too -> the second check still warns -> fails."""
    from types import SimpleNamespace

    from orcr_core.agents import cli_check

    monkeypatch.setenv("PATH", str(tmp_path))
    provider = SimpleNamespace(cli=("orcr-test-cli", "install it"))
    assert cli_check.missing_cli("p", provider, {}) is not None
    exe = tmp_path / "orcr-test-cli"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert cli_check.missing_cli("p", provider, {}) is None
