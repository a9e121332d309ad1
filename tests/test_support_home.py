"""``OrcrHome``'s shortcuts (orcr_testing/home.py) keep the CLI's meaning: ``get`` and
``status`` answer what ``agent get --json`` and ``server status --json`` print, and
``reap`` ends exactly the processes under the home."""

from __future__ import annotations

import json
import subprocess
import sys

from orcr_testing.home import processes_under


def test_get_and_status_through_the_sdk_are_what_the_cli_prints(server):
    """Planted: ``ask`` returning the SDK's row without the JSON round trip's shape
    (``dict(row, extra=1)``) -> fails."""
    server.run("agent", "run", "--provider", "testp", "--path", "g/one", "hi", check=True)
    server.run("agent", "kill", "g/one", check=True)
    row = server.ended("g/one")
    assert row == json.loads(server.run("agent", "get", "g/one", "--json", check=True).stdout)
    by_uuid = server.get(row["uuid"])
    assert by_uuid == row
    status = server.status()
    cli = json.loads(server.run("server", "status", "--json", check=True).stdout)
    assert status.keys() == cli.keys() and status["pid"] == cli["pid"] == server.proc.pid


def test_get_without_a_server_is_the_cli_with_its_error(orcr_home):
    """No server answers: the real CLI runs (and autostarts one), so a missing agent
    fails with the CLI's own words, as before."""
    try:
        orcr_home.get("no/such")
    except AssertionError as exc:
        assert "agent get no/such --json exited" in str(exc) and "no/such" in str(exc)
    else:
        raise AssertionError("get of a missing agent returned")


def test_reap_ends_the_processes_under_the_home_and_only_those(orcr_home, short_tmp):
    """Planted: the match without the trailing NUL (a home whose path is a prefix of
    another's matched too) -> fails."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    mine = subprocess.Popen(sleeper, env=orcr_home.env, start_new_session=True)
    other = subprocess.Popen(
        sleeper, env=dict(orcr_home.env, ORCR_HOME=f"{orcr_home.path}2"), start_new_session=True
    )
    try:
        assert [pid for pid, _ in processes_under(orcr_home.path)] == [mine.pid]
        assert len(orcr_home.reap()) == 1
        assert mine.wait(5) == -9 and other.poll() is None
    finally:
        other.kill()
        other.wait()
