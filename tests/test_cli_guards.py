"""CLI guards against costly mistakes: kill of a wide glob asks first, a second
foreground server fails for its supervisor."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

from orcr_core.kit.testing import read_rest, read_until, until


def _run_agents(server, paths: list[str]) -> None:
    with server.sdk() as orcr:
        for p in paths:
            orcr.run(provider="testp", path=p)


def _active(server) -> list[str]:
    rows = json.loads(server.run("agent", "ls", "--json", check=True).stdout)
    return sorted(r["path"] for r in rows)


def _on_a_terminal(server, *args, answer: str) -> tuple[int, str]:
    """Run the CLI with a real PTY as stdin/stderr and type ``answer``."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", *args],
        env=server.env,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = read_until(master, b"Kill them all?")
    os.write(master, answer.encode() + b"\n")
    proc.stdout.read()
    rc = proc.wait(60)
    seen += read_rest(master)
    return rc, seen.decode(errors="replace")


def test_kill_of_a_wide_glob_needs_yes_without_a_terminal(server):
    many = [f"k/a{i}" for i in range(6)]
    _run_agents(server, many)
    r = server.run("agent", "kill", "k/*")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "'k/*' matches 6 agents" in r.stderr and "--yes" in r.stderr
    assert "no terminal" in r.stderr
    assert _active(server) == sorted(many)  # nothing was killed
    r = server.run("agent", "kill", "k/*", "--yes", check=True)
    assert sorted(r.stdout.split()[::2]) == sorted(many)
    until(lambda: _active(server) == [], what="every match to end")


def test_kill_of_a_handful_does_not_ask(server):
    few = [f"h/a{i}" for i in range(5)]
    _run_agents(server, few)
    r = server.run("agent", "kill", "h/**", check=True)
    assert sorted(r.stdout.split()[::2]) == sorted(few)


def test_kill_of_a_wide_glob_asks_on_a_terminal(server):
    many = [f"t/a{i}" for i in range(7)]
    _run_agents(server, many)
    rc, out = _on_a_terminal(server, "agent", "kill", "**", answer="n")
    assert rc == 1 and "'**' matches 7 agents" in out and "nothing was killed" in out
    assert _active(server) == sorted(many)
    rc, out = _on_a_terminal(server, "agent", "kill", "**", answer="y")
    assert rc == 0, out
    until(lambda: _active(server) == [], what="every match to end")


def test_foreground_server_fails_when_one_already_runs(server):
    r = server.run("server", "start", "--foreground", timeout=30)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "already runs" in r.stderr and "did not start" in r.stderr
    server.run("server", "status", check=True)  # the running one is untouched
