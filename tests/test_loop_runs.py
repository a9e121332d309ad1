"""Loop runs on a real server with real processes: direct argv in the creation
cwd, ORCR_PATH scoping, process groups, logs with a cap and retention, stop and
timeout (TERM, grace, KILL, barrier glob-kill), the identity guard, and a run's
exit status surviving a SIGKILLed server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import loop_helpers
import pytest
from loop_helpers import (
    IGNORE_TERM,
    PY,
    TRAP_TERM,
    _alive,
    _create,
    _ended,
    _loop_events,
    _ready,
    _ready_text,
    _run,
    _run_status_in_store,
    _runs,
    _sql,
    _start,
)

from orcr_core.kit.testing import until
from orcr_core.sdk.client import ServerError

loops = loop_helpers.loops  # the fixture


def test_run_is_direct_argv_in_the_creation_cwd_with_orcr_path_and_its_own_group(loops):
    probe = (
        "import os, sys; print(os.getcwd(), os.environ['ORCR_PATH'], "
        "os.getpgid(0) == os.getpid(), sys.argv[1])"
    )
    # created from inside an agent's scope: the loop is still global
    res = _create(
        loops,
        "probe",
        "0 0 1 1 *",
        "--",
        PY,
        "-c",
        probe,
        "$HOME;echo x",
        env={"ORCR_PATH": "someagent/sub"},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == "probe"
    path = _start(loops, "probe")
    run = until(lambda: _ended(loops, path), what="run to end")
    assert (run["status"], run["exit_code"], run["kind"]) == ("ok", 0, "manual")
    assert run["pid"] == run["pgid"]
    out = loops.run("loop", "logs", "probe", "--source", "run", check=True).stdout
    assert out.split() == [str(loops.work), path, "True", "$HOME;echo", "x"]  # no shell
    kinds = [k for k, _ in _loop_events(loops, "probe")]
    assert kinds[:1] == ["loop.created"] and "run.started" in kinds
    orcr = loops.run("loop", "logs", "probe", "--run", path.split("/")[1], check=True).stdout
    assert "run.started" in orcr and "to=ok" in orcr and "loop.created" not in orcr


def test_failed_exit_and_unknown_command(loops):
    _create(loops, "bad", "0 0 1 1 *", "--", "sh", "-c", "exit 3")
    run = until(lambda: _ended(loops, _start(loops, "bad")) or None, what="bad run")
    assert (run["status"], run["exit_code"]) == ("failed", 3)
    # a command that is gone by the time it runs, and a directory that is gone
    script = loops.work / "gone.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    _create(loops, "vanish", "0 0 1 1 *", "--", str(script))
    script.unlink()
    run = until(lambda: _ended(loops, _start(loops, "vanish")) or None, what="vanish run")
    assert (run["status"], run["exit_code"]) == ("failed", 127)
    assert "cannot start" in run["error"] and "gone.sh" in run["error"]
    sub = loops.work / "sub"
    sub.mkdir()
    res = subprocess.run(
        [PY, "-m", "orcr_core.cli", "loop", "create", "nodir", "0 0 1 1 *", "--", "true"],
        env=loops.env,
        cwd=sub,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    sub.rmdir()
    run = until(lambda: _ended(loops, _start(loops, "nodir")) or None, what="nodir run")
    assert run["status"] == "failed" and f"directory {sub} is gone" in run["error"]
    res = _create(loops, "missing", "0 0 1 1 *", "--", "no-such-command-x")
    assert res.returncode == 1 and "not found on PATH" in res.stderr
    res = _create(loops, "badname", "61 * * * *", "--", "true")
    assert res.returncode == 1 and "minute field '61'" in res.stderr


def test_log_cap_and_retention_of_the_last_runs(loops):
    _create(loops, "chatty", "0 0 1 1 *", "--", PY, "-c", "print('x' * 9999)")
    paths = []
    for _ in range(3):
        p = _start(loops, "chatty")
        until(lambda p=p: _ended(loops, p), what="chatty run")
        paths.append(p)
    # the oldest log goes once the third run has ended (a poll can see it end first)
    logs = until(
        lambda: (f := sorted((loops.path / "loops").glob("*/runs/*.log")))[2:] == [] and f,
        what="retention to keep two logs",
    )
    assert [f.stem for f in logs] == sorted(p.split("/")[1] for p in paths[1:])  # keep_runs = 2
    text = logs[0].read_text()
    assert text.startswith("x" * 2000) and "log capped at 2000 bytes" in text
    assert len(text) < 2200


def test_once_loop_fires_and_releases_its_name(loops):
    # a once loop that has not fired holds its name (an hour away: no race with firing)
    assert _create(loops, "once", "--once-at", "1h", "--", "true").returncode == 0
    assert _create(loops, "once", "0 0 1 1 *", "--", "true").returncode == 1  # name in use
    loops.run("loop", "rm", "once", check=True)
    res = _create(loops, "once", "--once-at", "1s", "--", "true")
    assert res.returncode == 0, res.stderr
    uuid = res.stdout.split()[1]
    until(
        lambda: any(
            lp["uuid"] == uuid and lp["status"] == "ended"
            for lp in json.loads(loops.run("loop", "ls", "--all", "--json", check=True).stdout)
        ),
        what="the once loop to fire",
    )
    (run,) = _runs(loops, "once")
    assert run["kind"] == "scheduled"
    until(lambda: _ended(loops, run["path"]), what="the once run")
    assert _create(loops, "once", "0 0 1 1 *", "--", "true").returncode == 0  # free again
    assert [lp["name"] for lp in json.loads(loops.run("loop", "ls", "--json").stdout)] == ["once"]


def test_stop_during_the_grace_period_ends_stopped_without_kill(loops):
    _create(loops, "graceful", "0 0 1 1 *", "--", "sh", "-c", TRAP_TERM)
    path = _start(loops, "graceful")
    until(lambda: _ready(loops, path), what="the run to be ready")
    pid = _run(loops, path)["pid"]
    res = loops.run("loop", "run", "stop", path, "--wait", check=True)
    assert res.stdout.split() == [path, "stopped"]  # --wait says how it ended
    run = _run(loops, path)
    assert run["status"] == "stopped" and run["exit_code"] == 0
    signals = [
        (k, d["signal"]) for k, d in _loop_events(loops, "graceful") if k.startswith("run.signal")
    ]
    # intent committed before the OS call, applied after: no KILL within the grace
    assert signals == [("run.signal_requested", "TERM"), ("run.signal_applied", "TERM")]
    assert not _alive(pid)
    assert "got TERM" in loops.run("loop", "logs", "graceful", "--source", "run").stdout


def test_stop_kills_after_the_grace_period_and_a_second_stop_is_harmless(loops):
    _create(loops, "stubborn", "0 0 1 1 *", "--", "sh", "-c", IGNORE_TERM)
    path = _start(loops, "stubborn")
    until(lambda: _ready(loops, path), what="the run to be ready")
    pid = _run(loops, path)["pid"]
    loops.config(loops.path.joinpath("config.toml").read_text().replace('"1s"', '"3s"'))
    with loops.sdk() as o:
        o.client.call("config.reload")
        # the second stop comes within the grace period: it neither restarts nor doubles it
        assert [r["result"] for r in o.loop_run_stop(path)] == ["stopping"]
        assert [r["result"] for r in o.loop_run_stop(path)] == ["stopping"]
        # the barrier: while stopping, no new agent under the run's path
        with pytest.raises(ServerError) as exc:
            o.run("x", provider="testp", path="late", cwd="/", scope=path)
        assert exc.value.code == "run_stopping"
        assert o.loop_run_list("stubborn")[0]["status"] == "stopping"
    run = until(lambda: _ended(loops, path), what="the stop to finish")
    assert run["status"] == "stopped" and run["exit_code"] == -signal.SIGKILL
    signals = [d["signal"] for _, d in _loop_events(loops, "stubborn", "run.signal_requested")]
    assert signals == ["TERM", "KILL"]
    assert not _alive(pid)


def test_timeout_follows_the_stop_path(loops):
    _create(loops, "slow", "0 0 1 1 *", "--timeout", "1s", "--", "sh", "-c", IGNORE_TERM)
    path = _start(loops, "slow")
    run = until(lambda: _ended(loops, path), what="the timeout")
    assert run["status"] == "timeout"
    statuses = [d["to"] for _, d in _loop_events(loops, "slow", "run.status")]
    assert statuses == ["pending", "running", "stopping", "timeout"]


def test_stop_a_pending_run_cancels_it_and_rm_cancels_the_rest(loops):
    _create(loops, "busy", "0 0 1 1 *", "--", "sleep", "300")
    first = _start(loops, "busy")
    second, third = _start(loops, "busy"), _start(loops, "busy")
    assert [r["status"] for r in _runs(loops, "busy")] == ["running", "pending", "pending"]
    assert loops.run("loop", "run", "stop", second, check=True).stdout.split() == [
        second,
        "canceled",
    ]
    res = loops.run("loop", "rm", "busy", check=True).stdout
    assert third in res
    assert [r["status"] for r in _runs(loops, "busy")] == ["running", "canceled", "canceled"]
    loops.run("loop", "run", "stop", first, "--wait", check=True)
    assert _run(loops, first)["status"] == "stopped"


def test_identity_guard_refuses_to_signal_a_reused_pid(loops):
    _create(loops, "guarded", "0 0 1 1 *", "--", "sleep", "300")
    path = _start(loops, "guarded")
    real = until(lambda: _run(loops, path)["pid"], what="the run's pid")
    decoy = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        # the row now names a live process that is not the run (its pid was reused)
        conn = sqlite3.connect(loops.path / "store.db")
        with conn:
            conn.execute(
                "UPDATE loop_run SET pid = ?, pgid = ?, proc_start = proc_start - 3600 "
                "WHERE run_id = ?",
                (decoy.pid, decoy.pid, path.split("/")[1]),
            )
        conn.close()
        loops.run("loop", "run", "stop", path, "--wait", check=True)
        assert decoy.poll() is None  # never signalled
        assert _run(loops, path)["status"] == "stopped"
        dead = _loop_events(loops, "guarded", "run.dead")
        assert len(dead) == 1 and "nothing signalled" in dead[0][1]["why"]
        assert _loop_events(loops, "guarded", "run.signal_requested") == []
    finally:
        decoy.kill()
        decoy.wait()
        os.killpg(real, signal.SIGKILL)


def test_server_sigkilled_mid_run_keeps_the_exit_status(loops):
    marker = loops.work / "go"
    script = f"echo started; while [ ! -e {marker} ]; do sleep 0.05; done; exit 7"
    _create(loops, "durable", "0 0 1 1 *", "--", "sh", "-c", script)
    # 1. the run ends while the server is down
    path = _start(loops, "durable")
    until(lambda: _ready_text(loops, path, "started"), what="the run to start")
    loops.kill_server()
    marker.touch()
    state = next((loops.path / "loops").glob(f"*/runs/{path.split('/')[1]}.state"))
    until(lambda: json.loads(state.read_text()).get("exit_code") == 7, what="the exit record")
    loops.start_server()
    run = until(lambda: _ended(loops, path), what="recovery")
    assert (run["status"], run["exit_code"]) == ("failed", 7)
    decisions = [d.get("decision") for _, d in _loop_events(loops, "durable", "run.status")]
    assert "exited while the server was down" in decisions
    # 2. the server dies and is back before the run ends: the run is adopted
    marker.unlink()
    path = _start(loops, "durable")
    until(lambda: _ready_text(loops, path, "started"), what="the second run to start")
    loops.kill_server()
    loops.start_server()
    until(
        lambda: any(
            d["decision"].startswith("still running")
            for _, d in _loop_events(loops, "durable", "run.recovered")
        ),
        what="adoption",
    )
    marker.touch()
    run = until(lambda: _ended(loops, path), what="the adopted run to end")
    assert (run["status"], run["exit_code"]) == ("failed", 7)


def test_agents_of_a_run_land_under_its_path_and_are_glob_killed_by_stop(loops):
    spawn = (
        f"{PY} -m orcr_core.cli agent run --provider testp --path review/file_1 x && "
        f"{PY} -m orcr_core.cli agent run --provider testp --name second x && "
        "echo spawned; exec sleep 300"
    )
    _create(loops, "nightly", "0 0 1 1 *", "--", "sh", "-c", spawn)
    path = _start(loops, "nightly")
    until(lambda: _ready_text(loops, path, "spawned"), what="the agents to be admitted")
    with loops.sdk() as o:
        agents = o.list(prefix="nightly")
        assert sorted(a["path"] for a in agents) == [f"{path}/review/file_1", f"{path}/second"]
        until(lambda: all(a["status"] == "working" for a in o.list(prefix="nightly")))
        o.run("x", provider="testp", path="elsewhere/keep", cwd="/")
        loops.run("loop", "run", "stop", path, "--wait", check=True)
        assert o.list(prefix="nightly") == []  # the barrier glob-kill left none
        ended = o.list(prefix="nightly", all=True)
        assert {a["exit_reason"] for a in ended} == {"killed"}
        assert [a["path"] for a in o.list()] == ["elsewhere/keep"]
    # the barrier: no new agents under a stopped run's path
    res = loops.run(
        "agent", "run", "--provider", "testp", "--path", "late", "x", env={"ORCR_PATH": path}
    )
    assert res.returncode == 1 and "run_stopping" in res.stderr
    assert _run(loops, path)["status"] == "stopped"


def test_pending_runs_survive_a_restart_and_start_when_a_slot_frees(loops):
    marker = loops.work / "done"
    _create(
        loops,
        "queue",
        "0 0 1 1 *",
        "--",
        "sh",
        "-c",
        f"while [ ! -e {marker} ]; do sleep 0.05; done",
    )
    first, second = _start(loops, "queue"), _start(loops, "queue")
    loops.kill_server()
    loops.start_server()
    assert _run(loops, second)["status"] == "pending"
    kinds = [k for k, _ in _loop_events(loops, "queue")]
    assert "loop.recovered" in kinds
    marker.touch()
    until(lambda: _ended(loops, first) and _ended(loops, second), what="both runs")
    assert [r["status"] for r in _runs(loops, "queue")] == ["ok", "ok"]


def test_paused_loop_holds_a_manual_run_until_resumed(loops):
    _create(loops, "held", "0 0 1 1 *", "--", "true")
    loops.run("loop", "pause", "held", check=True)
    path = _start(loops, "held")
    assert _run(loops, path)["status"] == "pending"
    assert _loop_events(loops, "held", "loop.paused_hold")
    loops.run("loop", "resume", "held", check=True)
    assert until(lambda: _ended(loops, path))["status"] == "ok"


def test_loop_ls_shows_next_fire_local_and_utc_and_the_last_run(loops):
    _create(loops, "shown", "0 9 * * *", "--tz", "Europe/Paris", "--", "true")
    path = _start(loops, "shown")
    until(lambda: _ended(loops, path))
    out = loops.run("loop", "ls", check=True).stdout.splitlines()
    assert out[0].split()[:3] == ["NAME", "STATUS", "CADENCE"]
    row = out[1]
    assert "CET" in row and "0 9 * * * Europe/Paris" in row and path.split("/")[1] + " ok" in row
    data = json.loads(loops.run("loop", "ls", "--json", check=True).stdout)[0]
    assert data["next_fire_at"].endswith(":00:00.000Z") and data["tz"] == "Europe/Paris"


@pytest.mark.parametrize(
    "point, outcome",
    [("before_run_launch", ("failed", None)), ("after_run_launch", ("failed", 5))],
)
def test_sigkill_at_each_launch_step(loops, point, outcome):
    """Killed before the supervisor had the run: recovery claims it and closes it
    (the command never runs). Killed after: the command runs and its exit is kept."""
    loops.stop_server()
    loops.start_server(extra_env={"ORCR_FAULT": point})
    _create(loops, "crashy", "0 0 1 1 *", "--", "sh", "-c", "echo ran; exit 5")
    loops.run("loop", "run", "start", "crashy")  # the reply may be lost
    assert loops.proc.wait(30) == -signal.SIGKILL
    loops.start_server()
    (run,) = _runs(loops, "crashy")
    run = until(lambda: _ended(loops, run["path"]), what="recovery to settle the run")
    assert (run["status"], run["exit_code"]) == outcome
    ran = _ready_text(loops, run["path"], "ran")
    assert ran == (outcome[1] is not None)  # the command ran exactly when it should
    if point == "before_run_launch":
        assert "before the run's command started" in run["error"]


def test_recovery_closes_a_dead_run_and_glob_kills_its_agents(loops):
    spawn = (
        f"{PY} -m orcr_core.cli agent run --provider testp --path worker x && "
        "echo spawned; exec sleep 300"
    )
    _create(loops, "reboot", "0 0 1 1 *", "--", "sh", "-c", spawn)
    path = _start(loops, "reboot")
    until(lambda: _ready_text(loops, path, "spawned"), what="the agent to be admitted")
    with loops.sdk() as o:  # a start SIGKILLed before its pane is recorded ends failed
        until(
            lambda: o.get(f"{path}/worker")["status"] != "starting",
            what="the agent past its start",
        )
    ((sup_pid, pgid),) = _sql(
        loops, "SELECT sup_pid, pgid FROM loop_run WHERE run_id = ?", (path.split("/")[1],)
    )
    loops.kill_server()
    # as after a reboot: the supervisor and the command are gone, with no exit record
    os.kill(sup_pid, signal.SIGKILL)
    os.killpg(pgid, signal.SIGKILL)
    until(lambda: not _alive(sup_pid) and not _alive(pgid), what="the processes to die")
    loops.start_server()
    run = until(lambda: _ended(loops, path), what="recovery")
    assert run["status"] == "failed" and "vanished" in run["error"]
    decisions = [d.get("decision") for _, d in _loop_events(loops, "reboot", "run.status")]
    assert "dead" in decisions
    with loops.sdk() as o:
        until(lambda: o.list(prefix="reboot") == [], what="the run's agents to be killed")
        (agent,) = o.list(prefix="reboot", all=True)
        assert agent["path"] == f"{path}/worker"
        assert agent["exit_reason"] in ("killed", "canceled")  # canceled if still queued


def test_recovery_skips_a_fire_missed_while_the_server_was_down(loops):
    _create(loops, "missed", "0 0 1 1 *", "--", "true")
    _create(loops, "paused", "0 0 1 1 *", "--", "true")
    loops.run("loop", "pause", "paused", check=True)
    held = _start(loops, "paused")
    loops.stop_server()
    # the server was down through a fire an hour ago
    _sql(loops, "UPDATE loop SET next_fire_at = ? WHERE name = 'missed'", (time.time() - 3600,))
    loops.start_server()
    (missed,) = _loop_events(loops, "missed", "loop.missed")
    assert missed[1]["count"] == 1 and missed[1]["late_by"] >= 3600
    lp = json.loads(loops.run("loop", "ls", "--json", check=True).stdout)[0]
    assert lp["name"] == "missed" and lp["next_fire_at"].startswith(
        f"{time.gmtime().tm_year + 1}-01-01"
    )
    assert _runs(loops, "missed") == []  # never replayed
    assert _run(loops, held)["status"] == "pending"  # the paused loop still holds it
    recovered = {d["name"]: d for _, d in _loop_events(loops, kind="loop.recovered")}
    assert recovered["paused"]["status"] == "paused" and recovered["paused"]["pending"] == 1
    assert len(_loop_events(loops, "paused", "loop.paused_hold")) == 2  # at start, at recovery


def test_supervisors_are_kept_warm_only_while_a_loop_is_active(loops):
    """A server with no active loop starts no spare supervisor (each is a Python
    start); a loop's creation wakes the timer, which warms two. Planted: the spares
    refilled at start as before -> 2 with no loop -> fails; _keep_warm never called
    -> none after the loop's creation -> fails."""
    with loops.sdk() as o:
        until(lambda: o.status()["loops"]["ticks"] >= 1, what="the first tick")
        time.sleep(1)  # the quiet period under test: a spare would be up by now
        assert o.status()["loops"]["warm_supervisors"] == 0
        o.loop_create("yearly", ["/bin/true"], cron="0 0 1 1 *", tz="UTC")
        until(lambda: o.status()["loops"]["warm_supervisors"] == 2, what="two warm spares")


def test_the_timer_sleeps_until_the_next_fire_instead_of_scanning(loops):
    with loops.sdk() as o:
        for i in range(20):
            o.loop_create(f"idle{i}", ["/bin/true"], cron="0 0 1 1 *", tz="UTC")
        before = o.status()["loops"]
        assert before["active"] == 20 and before["next_fire_at"].endswith("-01-01T00:00:00.000Z")
        time.sleep(2.5)  # the quiet period under test: nothing is due
        assert o.status()["loops"]["ticks"] == before["ticks"]  # not a single wake-up
        # a loop change wakes it early
        o.loop_create("soon", ["/bin/true"], once_at="1s", tz="UTC")
        until(lambda: o.status()["loops"]["ticks"] > before["ticks"], what="an early wake-up")


def test_sdk_loop_verbs(loops):
    from orcr_core.sdk import Orcr

    assert Orcr.loop_next(
        "0 9 * * *", tz="Europe/Paris", start="2026-07-01T00:00:00Z", count=2
    ) == [
        "2026-07-01T07:00:00Z",
        "2026-07-02T07:00:00Z",
    ]
    with loops.sdk() as o:
        lp = o.loop_create(
            "sdk", ["sh", "-c", "echo via sdk"], cron="0 9 * * *", cwd=str(loops.work)
        )
        assert (lp["name"], lp["status"], lp["cwd"]) == ("sdk", "active", str(loops.work))
        assert o.loop_pause("sdk")["status"] == "paused"
        assert o.loop_get("sdk")["next_fire_at"] is None
        assert o.loop_resume("sdk")["status"] == "active"
        run = o.loop_run_start("sdk")
        assert run["path"] == f"sdk/{run['run_id']}"
        until(lambda: o.loop_run_list("sdk")[0]["status"] == "ok")
        logs = o.loop_logs("sdk", source="run")["runs"]
        assert Path(logs[0]["log"]).read_text() == "via sdk\n"
        kinds = [e["kind"] for e in o.loop_logs("sdk")["events"]]
        assert kinds[:3] == ["loop.created", "loop.paused", "loop.resumed"]
        assert o.loop_rm("sdk")["loop"]["status"] == "ended"
        assert [x["name"] for x in o.loop_list(all=True)] == ["sdk"] and o.loop_list() == []


def test_loop_logs_follow_prints_a_run_until_it_ends(loops):
    marker = loops.work / "more"
    script = f"echo one; while [ ! -e {marker} ]; do sleep 0.05; done; echo two"
    _create(loops, "follow", "0 0 1 1 *", "--", "sh", "-c", script)
    path = _start(loops, "follow")
    until(lambda: _ready_text(loops, path, "one"), what="the first line")
    follower = subprocess.Popen(
        [PY, "-m", "orcr_core.cli", "loop", "logs", "follow", "--source", "run", "--follow"],
        env=loops.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout.readline() == "one\n"
        marker.touch()
        assert follower.stdout.readline() == "two\n"
        assert follower.wait(30) == 0  # it ends with the run
    finally:
        follower.kill()


def test_a_stop_under_way_resumes_after_a_server_crash(loops):
    _create(loops, "resumed", "0 0 1 1 *", "--", "sh", "-c", IGNORE_TERM)
    path = _start(loops, "resumed")
    until(lambda: _ready(loops, path), what="the run to be ready")
    pid = _run(loops, path)["pid"]
    conf = loops.path / "config.toml"
    loops.config(conf.read_text().replace('stop_grace = "1s"', 'stop_grace = "1h"'))
    with loops.sdk() as o:
        o.client.call("config.reload")
        o.loop_run_stop(path)
    until(lambda: _loop_events(loops, "resumed", "run.signal_requested"), what="TERM")
    loops.kill_server()  # mid-grace
    assert _alive(pid) and _run_status_in_store(loops, path) == "stopping"
    loops.config(conf.read_text().replace('stop_grace = "1h"', 'stop_grace = "1s"'))
    loops.start_server()
    run = until(lambda: _ended(loops, path), what="the resumed stop")
    assert run["status"] == "stopped" and not _alive(pid)
    signals = [d["signal"] for _, d in _loop_events(loops, "resumed", "run.signal_requested")]
    assert signals == ["TERM", "TERM", "KILL"]  # the stop path ran again from its start


def test_loop_ls_says_a_fire_was_missed_because_the_server_was_down(loops):
    """Issue 23 item 3: the user sees that the machine was off, not that the loop
    is broken."""
    _create(loops, "offline", "0 0 1 1 *", "--tz", "UTC", "--", "true")
    loops.stop_server()
    alive = loops.path / "loops" / "alive"
    now = time.time()
    os.utime(alive, (now - 7200, now - 7200))  # the server stopped two hours ago
    _sql(loops, "UPDATE loop SET next_fire_at = ? WHERE name = 'offline'", (now - 3600,))
    loops.start_server()
    lp = json.loads(loops.run("loop", "ls", "--json", check=True).stdout)[0]
    m = lp["last_missed"]
    assert m["reason"] == "server_down" and m["count"] == 1
    down_from = time.strftime("%H:%M", time.gmtime(now - 7200))
    # "server down 22:10–00:10", with dates when the two hours cross midnight UTC
    # ("server down 2026-12-01 22:10–2026-12-02 00:10": the test failed after midnight)
    assert m["why"].startswith("server down ") and f"{down_from}–" in m["why"], m["why"]
    out = loops.run("loop", "ls", check=True).stdout
    assert "LAST MISSED" in out and f"{down_from}–" in out
    (ev,) = _loop_events(loops, "offline", "loop.missed")
    assert ev[1]["reason"] == "server_down" and ev[1]["why"] == m["why"]
