"""A deleted socket (or run directory) never strands the server or its clients
(issue 8 item 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from orcr_core.kit.testing import until

#: holds the server lock like a server that says it listens, but has no socket;
#: on SIGTERM it lingers a moment before exiting, as a server finishing up would
FAKE_HOLDER = textwrap.dedent(
    """
    import fcntl, os, signal, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()} listening {sys.argv[2]}\\n".encode())
    def term(*_):
        time.sleep(0.5)
        sys.exit(0)
    signal.signal(signal.SIGTERM, term)
    print("held", flush=True)
    while True:
        time.sleep(60)
    """
)


def _status_pid(home) -> int:
    return home.status()["pid"]


def test_server_recreates_a_deleted_socket(server):
    server.socket.unlink()
    until(lambda: server.socket.exists(), what="the server to recreate its socket")
    assert _status_pid(server) == server.proc.pid  # the same server, reachable again
    assert server.run("agent", "ls").returncode == 0
    assert (server.socket.stat().st_mode & 0o777) == 0o600


def test_server_restores_a_deleted_run_directory_and_keeps_the_lock(server):
    import shutil

    shutil.rmtree(server.path / "run")
    until(lambda: server.socket.exists(), what="the server to recreate run/")
    assert _status_pid(server) == server.proc.pid
    # the lock is held again: a second server refuses to start beside this one
    assert "already runs" in server.run_second_server().stderr
    assert _status_pid(server) == server.proc.pid


def test_client_says_at_once_that_the_socket_is_gone(orcr_home):
    run = orcr_home.path / "run"
    run.mkdir(mode=0o700)
    fake = subprocess.Popen(
        [sys.executable, "-c", FAKE_HOLDER, str(run / "server.lock"), str(orcr_home.socket)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout.readline() == "held\n"
        for args in (["agent", "ls"], ["server", "status"]):
            r = orcr_home.run(*args)
            assert r.returncode == 6, r.stderr
            assert "holds the lock but its socket" in r.stderr, r.stderr
            assert f"(pid {fake.pid})" in r.stderr
        doc = json.loads(orcr_home.run("doctor", "--json").stdout)
        row = {c["check"]: c for c in doc["checks"]}["server"]
        assert row["level"] == "fail" and f"pid {fake.pid}" in row["detail"]
        assert "orcr server stop" in row["fix"]
        r = orcr_home.run("server", "stop")
        assert r.returncode == 0, r.stderr
        assert f"orcr server {fake.pid} stopped" in r.stdout
        assert fake.poll() is not None  # stop returned only once the process had exited
    finally:
        if fake.poll() is None:
            fake.kill()
            fake.wait()


def test_stop_waits_until_the_server_has_exited(server):
    r = server.run("server", "stop")
    assert r.returncode == 0 and f"orcr server {server.proc.pid} stopped" in r.stdout
    assert server.proc.poll() is not None
    assert server.run("server", "stop").stdout.strip() == "orcr server is not running"
    assert not os.path.exists(server.socket)
