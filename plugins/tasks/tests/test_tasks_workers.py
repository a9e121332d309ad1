"""Workers end to end: real orcr server, real tmux, the bundled echo agent.

The echo agent answers each prompt with the prompt's own text (``[sleep N]`` and
``[fail]`` in front change a turn), so a builder's answer carries the task's
``REVISION:``/``QUESTION:`` lines and a verifier's carries the ``VERDICT:`` line
of the finish condition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from orcr_tasks.queue import STATES
from orcr_testing.tasks import last_beat, spec

from orcr_core.kit.testing import until

pytestmark = pytest.mark.parametrize("live", ["tmux"], indirect=True)

FAST = ["--provider", "echo", "--heartbeat", "0.2s", "--drain"]


def tasks(live, *args, check=True, timeout=120):
    return live.run("tasks", *args, check=check, timeout=timeout)


def where(q) -> dict[str, str]:
    seen = {}
    for s in STATES:
        for tid in q.ids(s):
            assert tid not in seen, f"{tid} in {seen[tid]}/ and {s}/"
            seen[tid] = s
    return seen


def test_build_review_verify_park_answer_and_release(live, q):
    live.start_server()
    d = spec(q)
    # added in-process: `tasks add` is test_tasks_queue.py's; each CLI process costs ~0.3 s
    # of CPU (~0.45 s on PostgreSQL: the driver's import), minutes at load 50
    q.add("Say hello.\nREVISION: abc123", "VERDICT: pass", task_id="hello", cluster="docs")
    q.add("Then wave.", "VERDICT: pass", task_id="after", depends_on=["hello"])
    q.add("Migrate.\nQUESTION: which database?", "VERDICT: reject tests fail", task_id="iso",
          cluster="db")  # fmt: skip

    r = tasks(live, "work", d, "--role", "builder", *FAST)
    assert where(q) == {"hello": "review", "after": "backlog", "iso": "inbox"}, r.stderr
    assert "which database?" in q.read("inbox", "iso").body
    assert q.read("review", "hello").meta["revision"] == "abc123"
    assert q.read("review", "hello").meta["built_by"] == "echo"

    assert tasks(live, "answer", d, "iso", "postgres, ANSWER-SECRET").stdout == "iso todo\n"
    tasks(live, "work", d, "--role", "builder", *FAST)  # answered: no second park
    assert where(q)["iso"] == "review"
    results = q.results("iso")
    assert "ANSWER-SECRET" in results and "Do the work" in results  # the builder's report

    r = tasks(live, "work", d, "--role", "verifier", *FAST)
    assert where(q) == {"hello": "done", "after": "todo", "iso": "todo"}, r.stderr
    done = q.read("done", "hello")
    assert done.meta["passes"] == ["echo"] and done.meta["done_at"]
    iso = q.read("todo", "iso")
    assert iso.attempts == 1 and iso.sections("Reject") == 1  # VERDICT: reject
    reject = iso.body[iso.body.index("## Reject") :]
    # the verifier's answer is its prompt (echo): the finish condition, never the report
    assert "tests fail" in reject and "Migrate." in reject
    assert "ANSWER-SECRET" not in reject and "Do the work" not in reject

    agents = json.loads(live.run("agent", "ls", "--all", "--json", check=True).stdout)
    paths = sorted(a["path"].rsplit("_", 1)[0] for a in agents)
    assert paths == sorted(
        f"tasks/{q.name}/{p}" for p in ["hello/build", "iso/build", "iso/build",
                                       "hello/verify", "iso/verify"]
    )  # fmt: skip
    assert all(a["status"] == "ended" for a in agents)  # each killed once collected

    s = json.loads(tasks(live, "status", d, "--json").stdout)
    assert s["counts"]["done"] == 1 and s["counts"]["todo"] == 2 and s["done_last_hour"] == 1
    assert s["clusters"]["db"]["reject_rate"] == 1.0
    assert s["clusters"]["docs"]["reject_rate"] == 0.0

    # usage (issue 25): each task's cost is its agents' usage; per attempt in tasks show
    spent = {a["path"]: a["usage"]["tokens"] for a in agents}
    assert all(spent.values())  # echo reports words as tokens
    under = lambda tid: sum(n for p, n in spent.items() if p.startswith(f"tasks/{q.name}/{tid}/"))  # noqa: E731
    assert s["usage"] == {
        "tokens": sum(spent.values()),
        "tasks": {t: under(t) for t in ("hello", "iso")},
    }
    show = json.loads(tasks(live, "show", d, "iso", "--json").stdout)["usage"]
    assert show["tokens"] == under("iso")
    started = [a["path"] for a in agents if a["path"].startswith(f"tasks/{q.name}/iso/")]
    assert [(a["role"], a["n"], a["path"], a["tokens"]) for a in show["agents"]] == [
        (role, n, path, spent[path])  # attempts numbered in the order the worker started them
        for (role, n), path in zip(
            [("build", 1), ("build", 2), ("verify", 1)], started, strict=True
        )
    ]
    text = tasks(live, "show", d, "iso")
    assert f"usage: {under('iso')} tokens" in text.stderr and "attempt 2: " in text.stderr
    assert f"usage: {sum(spent.values())} tokens; most: iso" in tasks(live, "status", d).stdout


def test_three_failed_attempts_and_a_turn_timeout_go_to_failed(live, q):
    live.start_server()
    d = spec(q)
    tasks(live, "add", d, "--id", "broken", "--done-when", "x", "--", "[fail] nope")
    tasks(live, "add", d, "--id", "hangs", "--done-when", "x", "--", "[sleep 60] forever")
    r = tasks(live, "work", d, "--role", "builder", "--slots", "2", "--timeout", "1s", *FAST)
    assert where(q) == {"broken": "failed", "hangs": "failed"}, r.stderr
    for tid in ("broken", "hangs"):
        t = q.read("failed", tid)
        assert t.attempts == 3 and t.sections("Attempt failed") == 3
    assert "timeout" in q.read("failed", "hangs").body
    assert q.results("broken") is None


def test_a_sigkilled_worker_is_reaped_and_its_task_retried(live, q):
    live.start_server()
    d = spec(q)
    tasks(live, "add", d, "--id", "slow", "--done-when", "x", "--", "[sleep 3] slow\nREVISION: r1")
    worker = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", "tasks", "work", d, "--role", "builder",
         "--provider", "echo", "--heartbeat", "0.2s"],
        env=live.env, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        until(lambda: (q.read_heartbeat("slow") or {}).get("uuid"), what="the agent to start")
        before = last_beat(q, "slow")
        until(lambda: last_beat(q, "slow") > before, what="the loop to touch the heartbeat")
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    assert where(q) == {"slow": "doing"}
    assert tasks(live, "reap", d, "--stale", "30s").stdout == ""  # not stale yet
    orphan = q.read_heartbeat("slow")["uuid"]
    until(lambda: q.age("doing", "slow") > 1.0, what="the heartbeat to go stale")
    assert tasks(live, "reap", d, "--stale", "1s").stdout == "slow doing -> todo\n"
    a = json.loads(live.run("agent", "get", orphan, "--json", check=True).stdout)
    assert (a["status"], a["exit_reason"]) == ("ended", "killed")  # the dead worker's agent
    t = q.read("todo", "slow")
    assert t.attempts == 1 and "reaped: no heartbeat" in t.body
    tasks(live, "work", d, "--role", "builder", *FAST)
    assert where(q) == {"slow": "review"}
    assert q.read("review", "slow").attempts == 1
