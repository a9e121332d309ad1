"""``OrcrHome``'s shortcuts (orcr_testing/home.py) keep the CLI's meaning: ``get`` and
``status`` answer what ``agent get --json`` and ``server status --json`` print, and
``reap`` ends exactly the processes under the home, found in the test's freezer
cgroup where there is one (orcr_testing/procgroup.py), else by a ``/proc`` walk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from orcr_testing import home as home_mod
from orcr_testing import procgroup
from orcr_testing.home import processes_under

from orcr_core.kit.testing import until


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


def test_reap_ends_the_processes_under_the_home_and_only_those(orcr_home, monkeypatch):
    """The fallback without a test group (not root, cgroup v2 only): the ``/proc`` walk.
    Planted: the match without the trailing NUL (a home whose path is a prefix of
    another's matched too) -> fails."""
    monkeypatch.setattr(orcr_home, "group", None)
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


#: a daemon as tmux's server is one: fork, setsid, fork again, the middle ones exit at
#: once (the test's child is gone, the daemon is init's), then its pid in argv[1]
DAEMON = r"""
import os, sys, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""

needs_freezer = pytest.mark.skipif(
    not os.access(procgroup.ROOT / "cgroup.procs", os.W_OK),
    reason="no writable cgroup v1 freezer hierarchy (not root, or cgroup v2 only): "
    "reap walks /proc there, as test_reap_ends_the_processes_under_the_home_... shows",
)


def _daemon(env: dict, pidfile: Path) -> int:
    subprocess.run([sys.executable, "-c", DAEMON, str(pidfile)], env=env, check=True)
    return until(lambda: pidfile.exists() and int(pidfile.read_text()), 10, what="the daemon")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in "ZX"  # dead, or a zombie
    except FileNotFoundError:
        return True


@needs_freezer
def test_reap_finds_a_detached_daemon_in_the_test_group_without_walking_proc(
    orcr_home, short_tmp, monkeypatch
):
    """A double-forked, setsid'd daemon under the home (as tmux's server is) is in the
    test's freezer group and ``reap`` kills it with no ``/proc`` walk; one in the same
    group without this ORCR_HOME (a session's PostgreSQL, say) is left alone.
    Planted: ``members`` reading the root freezer group's ``cgroup.procs`` (where
    the worker came from) -> fails (the whole machine, the daemons not in it);
    ``members`` reading ``orcr-tests/`` (the folder above the group) -> fails (the
    daemons not found); ``enter`` not moving the worker into the group -> fails (the
    worker not in it); ``of_home`` matching every member -> fails (two killed, the
    other daemon too); the fixture not handing the group to ``OrcrHome`` -> fails
    (group None)."""
    group = orcr_home.group
    assert group is not None and procgroup.current() == group.path
    mine = _daemon(orcr_home.env, short_tmp / "mine.pid")
    other_env = {k: v for k, v in orcr_home.env.items() if k != "ORCR_HOME"}
    other = _daemon(other_env, short_tmp / "other.pid")
    try:
        assert {mine, other} <= set(group.members())

        def walk(home):
            raise AssertionError("reap walked /proc")

        monkeypatch.setattr(home_mod, "processes_under", walk)
        assert len(orcr_home.reap()) == 1
        until(lambda: _gone(mine), 10, what="the daemon to die")
        assert not _gone(other)
    finally:
        for pid in (mine, other):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


@needs_freezer
def test_a_test_group_holds_the_worker_until_it_leaves():
    """``enter`` moves the worker into a fresh group under where it was; ``leave`` moves
    it back and removes the group. Planted: ``leave`` not writing the worker back ->
    fails (still in the group, which stays: EBUSY); ``members`` reading the root group
    -> fails (not empty)."""
    before = procgroup.current()
    group = procgroup.enter()
    assert group is not None and group.path.parent == before / procgroup.PARENT
    assert procgroup.current() == group.path and group.members() == []
    group.leave()
    assert procgroup.current() == before and not group.path.exists()


def test_start_server_waits_for_its_own_server_not_a_stale_listener(orcr_home):
    """A server SIGKILLed while it forks leaves the child, until its exec, holding the
    listening socket: a connect succeeds with no server behind it. Played here by a
    listener that closes at the first connection (the child's exec): ``start_server``
    must return only once the server it started listens, so the next call finds it.

    Planted: ``wait_socket`` returning at the first successful connect (as before) ->
    fails with "no orcr server at ..." (the rerun of
    ``test_resume_crash[after_start]``)."""
    import select
    import socket
    import threading

    path = orcr_home.socket
    path.parent.mkdir(mode=0o700, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.listen(8)
    wake_r, wake_w = os.pipe()

    def exec_after_first_connect() -> None:
        select.select([stale, wake_r], [], [], 60)
        stale.close()  # the child's exec closes its copy: nothing listens there any more

    child = threading.Thread(target=exec_after_first_connect)
    child.start()
    try:
        orcr_home.start_server()
        child.join(0.5)  # what a connect to the stale socket set off is over
        with orcr_home.sdk() as o:
            assert o.status()["pid"] == orcr_home.proc.pid
    finally:
        os.write(wake_w, b"x")
        child.join()
        os.close(wake_r)
        os.close(wake_w)
