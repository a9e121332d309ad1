"""Run handles and the socket handlers (issue 20 items 18, 27, 34, 36): a run's
handle survives its loop's name being reused; manual runs always get their own
row through loop.run.start and scheduled fires never fold into one; a loop's
zone is the creating shell's; loop logs --follow --run ends with the run; a
pruned log says so."""

from __future__ import annotations

import json
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import loop_helpers
from loop_helpers import _create, _ended, _run, _runs, _sql, _start

from orcr_core.kit.testing import until

loops = loop_helpers.loops  # the fixture


def test_a_run_handle_works_after_the_name_is_reused(loops):
    _create(loops, "olda", "0 0 1 1 *", "--", "sleep", "300")
    old = _start(loops, "olda")
    until(lambda: _run(loops, old)["status"] == "running")
    loops.run("loop", "rm", "olda", check=True)  # the run goes on
    _create(loops, "olda", "0 0 1 1 *", "--", "sleep", "300")
    # loop run ls shows the old definition's unfinished run beside the new one's
    assert [r["path"] for r in _runs(loops, "olda")] == [old]
    new = _start(loops, "olda")
    assert [r["path"] for r in _runs(loops, "olda")] == [old, new]
    res = loops.run("loop", "logs", "olda", "--run", old.split("/")[1])
    assert res.returncode == 0 and "run.started" in res.stdout
    res = loops.run("loop", "run", "stop", old, "--wait", check=True)
    assert res.stdout.split() == [old, "stopped"]
    # stopping the name stops every unfinished run that answers to it
    loops.run("loop", "run", "stop", "olda", "--wait", check=True)
    assert [r["status"] for r in _runs(loops, "olda")] == ["stopped"]  # the new one
    res = loops.run("loop", "run", "stop", "olda/rzzzzz")
    assert res.returncode != 0 and "no run 'olda/rzzzzz'" in res.stderr


def _force_fire(home, name):
    """Make the loop due now and wake the scheduler (any loop change wakes it)."""
    _sql(home, "UPDATE loop SET next_fire_at = ? WHERE name = ?", (time.time() + 0.3, name))
    with home.sdk() as o:
        o.loop_create(f"wake{int(time.time() * 1000) % 100000}", ["/bin/true"], cron="0 0 1 1 *")


def test_manual_runs_always_get_their_own_row_and_fires_never_fold_into_one(loops):
    marker = loops.work / "free"
    script = f"while [ ! -e {marker} ]; do sleep 0.05; done"
    _create(loops, "mix", "0 0 1 1 *", "--", "sh", "-c", script)
    first = _start(loops, "mix")  # holds the only slot
    manual = _start(loops, "mix")  # pending manual
    _force_fire(loops, "mix")
    until(lambda: len(_runs(loops, "mix")) == 3, what="the fire to be queued")
    # a fire does not fold into the pending manual run: it gets a scheduled row
    assert [(r["kind"], r["status"]) for r in _runs(loops, "mix")] == [
        ("manual", "running"),
        ("manual", "pending"),
        ("scheduled", "pending"),
    ]
    # loop.run.start through the socket handler, with a scheduled run pending
    with loops.sdk() as o:
        again = o.loop_run_start("mix")
    assert again["kind"] == "manual" and again["status"] == "pending"
    _force_fire(loops, "mix")  # folds into the pending scheduled run, not a manual one
    until(
        lambda: [r["fires"] for r in _runs(loops, "mix")] == [1, 1, 2, 1],
        what="the second fire to coalesce",
    )
    kinds = [(r["path"], r["kind"]) for r in _runs(loops, "mix")]
    assert kinds[1] == (manual, "manual") and kinds[3] == (again["path"], "manual")
    marker.touch()
    until(lambda: all(_ended(loops, p) for p, _ in kinds), what="every run", timeout=60)
    assert _run(loops, first)["status"] == "ok"


def test_the_zone_of_the_creating_shell_is_the_loop_zone(loops):
    for name, args, env in (
        ("paris", [], {"TZ": "Europe/Paris"}),
        ("ny", ["--tz", "America/New_York"], {"TZ": "Europe/Paris"}),
    ):
        res = _create(loops, name, "0 9 * * *", *args, "--", "true", env=env)
        assert res.returncode == 0, res.stderr
    got = {lp["name"]: lp for lp in json.loads(loops.run("loop", "ls", "--json").stdout)}
    for name, zone in (("paris", "Europe/Paris"), ("ny", "America/New_York")):
        lp = got[name]
        assert lp["tz"] == zone
        local = datetime.fromisoformat(lp["next_fire_at"].replace("Z", "+00:00"))
        local = local.astimezone(ZoneInfo(zone))
        assert (local.hour, local.minute) == (9, 0), (name, lp["next_fire_at"])


def test_logs_follow_of_one_run_ends_with_it_and_a_pruned_log_says_so(loops):
    marker = loops.work / "end"
    _create(
        loops, "fol", "0 0 1 1 *", "--", "sh", "-c", f"while [ ! -e {marker} ]; do sleep 0.05; done"
    )
    path = _start(loops, "fol")
    run_id = path.split("/")[1]
    import subprocess
    import sys

    follower = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", "loop", "logs", "fol", "--run", run_id, "-f"],
        env=loops.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: _run(loops, path)["status"] == "running")
        marker.touch()
        assert follower.wait(30) == 0  # it returns when the run ends
        assert "to=ok" in follower.stdout.read()
    finally:
        follower.kill()
    # keep_runs = 2 in this fixture: the third ended run prunes the first's log
    marker.unlink()
    for _ in range(2):
        p = _start(loops, "fol")
        marker.touch()
        until(lambda p=p: _ended(loops, p))
        marker.unlink()
    res = loops.run("loop", "logs", "fol", "--run", run_id, "--source", "run")
    assert res.returncode == 1 and "log was removed" in res.stderr and "keep_runs" in res.stderr
    res = loops.run("loop", "logs", "fol", "--source", "run")
    assert res.returncode == 0 and "logs removed" in res.stderr
