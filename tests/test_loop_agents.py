"""A loop run's agents end with the run (issue 20 items 13, 14, 16, 22, 26, 27):
whatever ends a run (its command's exit, a dead supervisor, stop, timeout) its
agents are glob-killed until none is left, unless the loop keeps them; an agent
that cannot be ended keeps a stopping run stopping and is named; every signal
has its intent row before the OS call; a run's environment is the creating
shell's, without the server's identity; bad commands are refused at create."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import loop_helpers
from loop_helpers import (
    PY,
    _alive,
    _create,
    _ended,
    _loop_events,
    _ready_text,
    _run,
    _sql,
    _start,
)

from orcr_core.kit.testing import until

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

loops = loop_helpers.loops  # the fixture

SPAWN = f"{PY} -m orcr_core.cli agent run --provider testp --path worker x && echo spawned"


def _agents(home, prefix, all_=False):
    with home.sdk() as o:
        return o.list(prefix=prefix, all=all_)


def test_a_run_that_exits_ends_its_agents_and_says_which(loops):
    for code in (0, 3):
        name = f"exits{code}"
        _create(loops, name, "0 0 1 1 *", "--", "sh", "-c", f"{SPAWN}; exit {code}")
        path = _start(loops, name)
        run = until(lambda p=path: _ended(loops, p), what="the run to end")
        assert run["status"] == ("ok" if code == 0 else "failed")
        until(lambda n=name: _agents(loops, n) == [], what="the run's agents to end")
        (agent,) = _agents(loops, name, all_=True)
        assert agent["path"] == f"{path}/worker" and agent["exit_reason"] in ("killed", "canceled")
        # the row is written once the barrier has seen none left: just after the kill
        (killed,) = until(
            lambda n=name: _loop_events(loops, n, "run.agents_killed"), what="the kill row"
        )
        assert killed[1]["agents"] == [f"{path}/worker"] and killed[1]["count"] == 1
        assert "exited" in killed[1]["why"]
    # loop run ls: each run's tokens are its agents' (<loop>/<run_id>/**, issue 25); the
    # turn rows as the monitor writes them (testp reports no usage of its own)
    runs = {r["path"]: r for r in loop_helpers._runs(loops, "exits0")}
    assert [r["usage"] for r in runs.values()] == [None]
    (path,) = runs
    for n, (where, tokens) in enumerate(
        [(f"{path}/worker", 30), (f"{path}/a/b", 12), ("exits0x/r/w", 500), ("exits0", 7)]
    ):
        _sql(
            loops,
            "INSERT INTO turn_usage (agent, turn, path, provider, ended_at, input, output, "
            "cache_read, cache_write) VALUES (?, 1, ?, 'testp', ?, ?, 1, 0, 0)",
            (f"u{n}", where, time.time(), tokens - 1),
        )
    (run,) = loop_helpers._runs(loops, "exits0")
    assert run["usage"]["tokens"] == 42 and run["usage"]["turns"] == 2
    table = loops.run("loop", "run", "ls", "exits0", check=True).stdout.splitlines()
    assert "TOKENS" in table[0] and " 42 " in table[1], table
    assert loop_helpers._runs(loops, "exits3")[0]["usage"] is None


def test_keep_agents_lets_them_outlive_the_run(loops):
    res = _create(loops, "keeper", "0 0 1 1 *", "--keep-agents", "--", "sh", "-c", SPAWN)
    assert res.returncode == 0, res.stderr
    assert json.loads(loops.run("loop", "ls", "--json", check=True).stdout)[0]["keep_agents"]
    path = _start(loops, "keeper")
    until(lambda: _ended(loops, path), what="the run to end")
    time.sleep(1.0)  # what is under test is that nothing happens
    assert [a["path"] for a in _agents(loops, "keeper")] == [f"{path}/worker"]
    assert _loop_events(loops, "keeper", "run.agents_killed") == []
    # but no new agent under the ended run's path
    res = loops.run(
        "agent", "run", "--provider", "testp", "--path", "late", "x", env={"ORCR_PATH": path}
    )
    assert res.returncode == 1 and "run_stopping" in res.stderr and "is ok" in res.stderr


def test_a_supervisor_that_dies_while_the_server_runs(loops):
    """Its command's group is killed with an intent row first, and its agents are
    glob-killed, as restart recovery does in the same case."""
    _create(loops, "orphan", "0 0 1 1 *", "--", "sh", "-c", f"{SPAWN}; exec sleep 300")
    path = _start(loops, "orphan")
    until(lambda: _ready_text(loops, path, "spawned"), what="the agent")
    ((sup_pid, pgid),) = _sql(
        loops, "SELECT sup_pid, pgid FROM loop_run WHERE run_id = ?", (path.split("/")[1],)
    )
    os.kill(sup_pid, signal.SIGKILL)
    run = until(lambda: _ended(loops, path), what="the run to be closed")
    assert run["status"] == "failed" and "supervisor" in run["error"]
    until(lambda: _agents(loops, "orphan") == [], what="its agents to end")
    until(lambda: _loop_events(loops, "orphan", "run.agents_killed"), what="the kill row")
    kinds = [(k, d.get("signal")) for k, d in _loop_events(loops, "orphan")]
    sig = [x for x in kinds if x[0].startswith("run.signal")]
    assert sig == [("run.signal_requested", "KILL"), ("run.signal_applied", "KILL")]
    assert ("run.agents_killed", None) in kinds
    until(lambda: not _alive(pgid), what="the command's group to be gone")


def test_stop_waits_for_an_agent_that_cannot_be_ended_and_names_it(loops):
    _create(loops, "stuck", "0 0 1 1 *", "--", "sh", "-c", f"{SPAWN}; exec sleep 300")
    path = _start(loops, "stuck")
    until(lambda: _ready_text(loops, path, "spawned"), what="the agent")
    until(lambda: [a["status"] for a in _agents(loops, "stuck")] == ["working"])
    td.set_close_refused(True)
    try:
        loops.run("loop", "run", "stop", path, check=True)
        remain = until(
            lambda: _loop_events(loops, "stuck", "run.agents_remain"), what="the agent named"
        )
        (row,) = remain[0][1]["agents"]
        assert row["path"] == f"{path}/worker" and "multiplexer" in row["why"]
        run = _run(loops, path)
        assert run["status"] == "stopping" and f"{path}/worker" in run["error"]
        time.sleep(4)  # well past the grace: the barrier does not give up
        assert _run(loops, path)["status"] == "stopping"
        assert [a["path"] for a in _agents(loops, "stuck")] == [f"{path}/worker"]
    finally:
        td.set_close_refused(False)
    run = until(lambda: _ended(loops, path), what="the stop to finish")
    assert run["status"] == "stopped" and not run["error"]
    assert _agents(loops, "stuck") == []


def test_a_run_sees_the_creating_shells_path_and_env_not_the_servers_identity(loops):
    loops.stop_server()
    loops.start_server(extra_env={"ORCR_ID": "server-id", "ORCR_LAUNCH_TOKEN": "server-token"})
    bindir = loops.work / "bin"
    bindir.mkdir()
    tool = bindir / "only-here"
    tool.write_text("#!/bin/sh\necho found-it\n")
    tool.chmod(0o755)
    probe = (
        "import os, shutil; e = os.environ; "
        "print(e.get('ORCR_ID'), e.get('ORCR_LAUNCH_TOKEN'), e.get('FOO'), "
        "bool(shutil.which('only-here')))"
    )
    shell_path = f"{bindir}:{os.environ['PATH']}"
    res = _create(
        loops,
        "envy",
        "0 0 1 1 *",
        "--env",
        "FOO=bar=baz",
        "--",
        PY,
        "-c",
        probe,
        env={"PATH": shell_path},
    )
    assert res.returncode == 0, res.stderr
    path = _start(loops, "envy")
    until(lambda: _ended(loops, path))
    out = loops.run("loop", "logs", "envy", "--source", "run", check=True).stdout
    assert out.split() == ["None", "None", "bar=baz", "True"]
    lp = json.loads(loops.run("loop", "ls", "--json", check=True).stdout)[0]
    assert lp["env"] == {"FOO": "bar=baz"} and lp["path_env"] == shell_path
    # a bare command found only on the creating shell's PATH is accepted
    assert _create(loops, "bare", "0 0 1 1 *", "--", "only-here", env={"PATH": shell_path})
    res = _create(loops, "resv", "0 0 1 1 *", "--env", "ORCR_PATH=x", "--", "true")
    assert res.returncode == 1 and "invalid_env" in res.stderr and "ORCR_PATH" in res.stderr


def test_bad_commands_and_a_missing_dashdash_are_refused_at_create(loops):
    (loops.work / "noexec.sh").write_text("#!/bin/sh\n")
    ok = loops.work / "ok.sh"
    ok.write_text("#!/bin/sh\necho ran-ok\n")
    ok.chmod(0o755)
    for argv, words in (
        (["./nonexistent.sh"], "not found"),
        ([str(loops.work / "nope.sh")], "not found"),
        (["./noexec.sh"], "not executable"),
        (["no-such-command-x"], "not found on PATH"),
    ):
        res = _create(loops, "bad", "0 0 1 1 *", "--", *argv)
        assert res.returncode == 1 and words in res.stderr and "invalid_command" in res.stderr
    res = _create(loops, "nodash", "0 0 1 1 *", "true")
    assert res.returncode == 2 and "the -- is required" in res.stderr
    res = _create(loops, "every", "--every", "5m", "--", "true")
    assert res.returncode == 2 and "*/5 * * * *" in res.stderr and "PATH" not in res.stderr
    res = _create(loops, "words", "0", "9", "*", "*", "*", "--", "true")
    assert res.returncode == 2 and "one CRON expression, quoted" in res.stderr
    assert loops.run("loop", "ls", "--all", "--json", check=True).stdout.strip() == "[]"
    # a relative path is taken from the loop's directory, and runs from there
    assert _create(loops, "rel", "0 0 1 1 *", "--", "./ok.sh").returncode == 0
    path = _start(loops, "rel")
    assert until(lambda: _ended(loops, path))["status"] == "ok"
    assert _ready_text(loops, path, "ran-ok")


def test_a_setsid_daemon_of_a_run_ends_with_it(loops):
    """Issue 20 item 20: a daemon that left the run's process group (setsid) is
    still the run's: it ends when the command does, by exit or by stop."""
    for name, tail, stop in (("exits", "echo bye", False), ("stopped", "exec sleep 300", True)):
        pidfile = loops.work / f"{name}.pid"
        script = f"setsid sleep 300 & echo $! > {pidfile}; {tail}"
        _create(loops, name, "0 0 1 1 *", "--", "sh", "-c", script)
        path = _start(loops, name)
        until(lambda p=pidfile: p.exists() and p.read_text().strip(), what="the daemon")
        daemon = int(pidfile.read_text())
        if stop:
            loops.run("loop", "run", "stop", path, "--wait", check=True)
        run = until(lambda p=path: _ended(loops, p), what="the run to end")
        assert not _alive(daemon), f"{name}: the setsid daemon outlived its run"
        assert (
            "outside its group"
            in loops.run(
                "loop", "logs", name, "--run", path.split("/")[1], "--source", "run"
            ).stdout
        )
        assert run["status"] == ("stopped" if stop else "ok")
