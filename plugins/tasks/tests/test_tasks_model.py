"""A task's own model (issue 33 item 3): ``tasks add --model``, kept in the task (a
file's front matter, a row's meta and its ``model`` column), and passed to the task's
agents over the worker's ``--model``, on both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from orcr_tasks.backend import QueueError
from orcr_testing.tasks import is_pg, spec


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orcr_core.cli", "tasks", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
    )


def test_tasks_add_model_is_kept_in_the_task(q):
    """``tasks add --model`` (the CLI) and ``Queue.add(model=)`` store it in the task:
    ``show`` prints it, and a row has it in its ``model`` column too. Planted: the
    PostgreSQL add leaving ``model`` out of meta -> fails; the CLI not passing
    ``--model`` on -> fails."""
    r = cli("add", spec(q), "--id", "a", "--model", "m-task", "--done-when", "x", "--", "t")
    assert r.returncode == 0 and r.stdout == "a todo\n", r.stderr
    assert q.read("todo", "a").meta["model"] == "m-task"
    assert 'model: "m-task"' in cli("show", spec(q), "a").stdout
    q.add("t", "x", task_id="b")
    assert "model" not in q.read("todo", "b").meta  # none given: the worker's --model
    if is_pg(q):
        rows = q._rows("SELECT id, model FROM orcr_tasks WHERE queue = %s ORDER BY id", [q.queue])
        assert rows == [("a", "m-task"), ("b", None)]


@pytest.mark.parametrize("bad", ["", "two words", "tab\there"])
def test_a_model_that_is_not_one_word_is_refused(q, bad):
    with pytest.raises(QueueError, match="a model name is one word"):
        q.add("t", "x", task_id="a", model=bad)
    assert q.where("a") == []
    r = cli("add", spec(q), "--model", bad, "--done-when", "x", "--", "t")
    assert r.returncode == 1 and "--model" in r.stderr and "no white space" in r.stderr


def test_init_adds_the_model_column_to_a_database_made_before_it(pg_url):
    """A database whose ``orcr_tasks`` has no ``model`` column (made before it) gets one
    from ``tasks init``, filled from the rows' meta; a worker reads meta, so it runs on
    the old one as well. Planted: the migration's ALTER TABLE left out -> fails."""
    from orcr_tasks.pg import PgQueue

    q = PgQueue.init(pg_url)
    try:
        q._run("ALTER TABLE orcr_tasks DROP COLUMN model")
        q.add("t", "x", task_id="a", model="m-old")
        assert q.read("todo", "a").meta["model"] == "m-old"  # the old schema works
        r = cli("init", pg_url)
        assert r.returncode == 0, r.stderr
        assert q._rows("SELECT model FROM orcr_tasks WHERE id = 'a'") == [("m-old",)]
        q.add("t", "x", task_id="b", model="m-new")
        assert q._rows("SELECT model FROM orcr_tasks WHERE id = 'b'") == [("m-new",)]
    finally:
        q.db.close()


#: the fake Claude Code CLI (tests/fakes): it takes ``--model`` as the real one does
#: (the echo agent does not, and orcr refuses --model for it)
FAKE_CLAUDE = Path(__file__).resolve().parents[3] / "tests" / "fakes" / "claude"


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_tasks_model_wins_over_the_workers_and_the_workers_is_the_default(live, q, short_tmp):
    """Builders and verifiers of a task with ``model:`` run on it; the task without one
    runs on ``tasks work --model``; a worker without ``--model`` passes none. Read from
    the agents orcr ran (``agent ls --all --json``) and from the fake CLI's transcript
    (the model it was started with). Planted: ``self.model or task.meta["model"]`` (the
    worker's wins) -> fails; the task's model ignored -> fails."""
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\nprompt_confirm = "1s"\n'
        + f'[providers.claude]\nhome = "{short_tmp / "claude"}"\n'
        + f"argv = {json.dumps([str(FAKE_CLAUDE)])}\n"
    )
    live.start_server()
    d = spec(q)
    q.add("Own.\nREVISION: r1", "VERDICT: pass", task_id="own", model="m-task")
    q.add("Plain.\nREVISION: r2", "VERDICT: pass", task_id="plain")
    q.add("Bare.\nREVISION: r3", "VERDICT: pass", task_id="bare", depends_on=["plain"])
    fast = ["--provider", "claude", "--heartbeat", "0.2s", "--drain", "--cwd", str(short_tmp)]
    for role in ("builder", "verifier"):
        r = live.run("tasks", "work", d, "--role", role, "--model", "m-run", *fast, timeout=180)
        assert r.returncode == 0, r.stderr
    # "bare" left backlog once "plain" passed: a worker with no --model builds it
    for role in ("builder", "verifier"):
        r = live.run("tasks", "work", d, "--role", role, *fast, timeout=180)
        assert r.returncode == 0, r.stderr
    assert {t: q.where(t) for t in ("own", "plain", "bare")} == {
        "own": ["done"],
        "plain": ["done"],
        "bare": ["done"],
    }, r.stderr
    rows = json.loads(live.run("agent", "ls", "--all", "--json").stdout)
    models: dict[tuple[str, str], set] = {}
    for row in rows:
        parts = row["path"].split("/")  # tasks/<queue>/<task>/<kind>_<token>
        if parts[0] == "tasks":
            models.setdefault((parts[2], parts[3].split("_")[0]), set()).add(row.get("model"))
    assert models == {
        ("own", "build"): {"m-task"},
        ("own", "verify"): {"m-task"},
        ("plain", "build"): {"m-run"},
        ("plain", "verify"): {"m-run"},
        ("bare", "build"): {None},
        ("bare", "verify"): {None},
    }
    # and the CLI itself was started with it: its transcripts' answers name the model
    seen = set()
    for path in (short_tmp / "claude").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("type") == "assistant":
                seen.add(rec["message"].get("model"))
    assert {"m-task", "m-run"} <= seen, seen
