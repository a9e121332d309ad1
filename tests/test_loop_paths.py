"""Agent paths under a loop (issue 20 items 15 and 19): the stopping barrier and
the loop's reserved level-1 path are checked inside admission's own transaction,
so no agent can slip in between the barrier and the run's glob-kill, and nobody
outside a run can put agents into a loop's history."""

from __future__ import annotations

import sqlite3
import threading

import loop_helpers
import pytest
from loop_helpers import PY, _create, _ready_text, _start

from orcr_core.agents import queue
from orcr_core.loops import defs, runs
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, Loop, db

loops = loop_helpers.loops  # the fixture
T0 = 1_780_000_020.0


class _Provider:
    needs_argv = False


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    (short_tmp / "agents").mkdir()
    yield short_tmp
    store_db.close_store()


def _loop_with_running_run(name="spawn"):
    loop = defs.create(
        dict(name=name, cron="0 0 1 1 *", tz="UTC", argv=["/bin/true"], cwd="/"), now=T0
    )
    with db.atomic("IMMEDIATE"):
        run = runs.allocate(loop, "manual", T0, T0)
        runs.set_status(run, "running", T0, started_at=T0)
    return loop, run


def _admit(store_dir, path, scope=None):
    spec = queue.RunSpec(provider="p", cwd="/", prompt="x", path=path, scope=scope)
    return queue.admit(spec, {"p": _Provider()}, store_dir / "agents", check=runs.admission_refusal)


def test_the_barrier_is_checked_inside_the_admission_transaction(store):
    """A stop that commits while an admission waits for the write lock is seen by
    it: the admission is refused, not let in behind the barrier's back."""
    loop, run = _loop_with_running_run()
    scope = f"spawn/{run.run_id}"
    other = sqlite3.connect(store / "store.db", isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")  # the stop path's transaction, not committed yet
    result = {}

    def admit():
        db.connect(reuse_if_open=True)
        try:
            result["ok"] = _admit(store, "late", scope=scope)
        except queue.AdmissionError as exc:
            result["err"] = exc

    t = threading.Thread(target=admit)
    t.start()
    t.join(0.5)
    assert t.is_alive()  # waiting on the write lock
    other.execute("UPDATE loop_run SET status = 'stopping' WHERE uuid = ?", (run.uuid,))
    other.execute("COMMIT")
    t.join(30)
    other.close()
    assert "ok" not in result, "an agent slipped in behind the stopping barrier"
    assert result["err"].code == "run_stopping" and "stopping" in str(result["err"])
    assert Agent.select().count() == 0


def test_a_loop_level_one_path_is_reserved_to_its_runs(store):
    loop, run = _loop_with_running_run()
    run_path = f"spawn/{run.run_id}"
    for path, scope in (
        ("spawn/intruder", None),
        ("spawn/rzzzzz/x", None),  # looks like a run that does not exist
        (f"{run_path}/x", None),  # a real run, from outside it
        ("intruder", "spawn"),  # a scope that is the loop, not one of its runs
        (f"{run_path}/x", "spawn/rother"),
    ):
        with pytest.raises(queue.AdmissionError) as exc:
            _admit(store, path, scope=scope)
        assert exc.value.code == "reserved_path", (path, scope)
        assert "spawn" in str(exc.value)
    # the auto-named path is checked too
    spec = queue.RunSpec(provider="p", cwd="/", prompt="x", scope="spawn")
    with pytest.raises(queue.AdmissionError):
        queue.admit(spec, {"p": _Provider()}, store / "agents", check=runs.admission_refusal)
    # the run's own command and its agents may
    assert _admit(store, "review/a", scope=run_path)["path"] == f"{run_path}/review/a"
    assert _admit(store, "sub", scope=f"{run_path}/review/a")["path"].startswith(run_path)
    # another name is free, and so is the name once the loop has ended
    assert _admit(store, "spawnx/a")["path"] == "spawnx/a"
    with db.atomic("IMMEDIATE"):
        defs.end(Loop.get_by_id(loop.uuid), "removed", T0)
    assert _admit(store, "spawn/later")["path"] == "spawn/later"
    assert Agent.select().count() == 4


def test_cli_refuses_an_intruder_under_a_loop_with_the_loop_named(loops):
    _create(loops, "spawn", "0 0 1 1 *", "--", "true")
    for path in ("spawn/intruder", "spawn/rzzzzz/x"):
        res = loops.run("agent", "run", "--provider", "testp", "--path", path, "x")
        assert res.returncode == 1 and "reserved_path" in res.stderr
        assert "loop spawn" in res.stderr
    assert loops.run("agent", "ls", "--all", "--json", check=True).stdout.strip() == "[]"
    # a run's command does land there
    spawn = f"{PY} -m orcr_core.cli agent run --provider testp --path kid x && echo spawned"
    _create(loops, "spawner", "0 0 1 1 *", "--", "sh", "-c", spawn)
    path = _start(loops, "spawner")
    from orcr_core.kit.testing import until

    until(lambda: _ready_text(loops, path, "spawned"), what="the run's agent")
