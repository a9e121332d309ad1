"""The task queue backend suite: one class every backend's tests subclass.

A backend (the file queue, PostgreSQL, a third party's) runs it by subclassing
:class:`QueueSuite` and giving a ``q`` fixture, a fresh, empty queue of its own::

    from orcr_testing.conformance import QueueSuite

    class TestMyBackend(QueueSuite):
        @pytest.fixture
        def q(self, tmp_path):
            return MyQueue.init(tmp_path / "queue")

The suite makes a claim look old through :func:`orcr_testing.tasks.age_claim`,
which knows the file queue's heartbeat files and PostgreSQL's ``hb_at`` column; a
third backend adds its own way there. What is checked: the reaper returns stale
builds with an attempt and fails a task at the third; a reaped verification is no
attempt; a reaped worker cannot finish over the next claim; the reject cap and the
passes a task needs; dependencies wait in backlog until done. The task's life is
the backend's ``moves`` part (``orcr_tasks.moves.Moves(backend)``), so the suite calls
``q.moves.reap``, ``q.moves.verdict`` and so on. docs/plugins/conformance.md.
"""

from __future__ import annotations

import pytest
from orcr_tasks.queue import QueueError

from orcr_testing.tasks import age_claim, heartbeats


def _age(q, state: str, tid: str, seconds: float) -> None:
    """Make a claim look ``seconds`` old (a file's heartbeat mtime; a row's hb_at)."""
    age_claim(q, tid, seconds)


class QueueSuite:
    """The task queue backend contract; subclass it with a ``q`` fixture."""

    def test_reaper_returns_stale_builds_with_an_attempt_and_caps_at_three(self, q):
        q.add("t", "x", task_id="a")
        for attempt in (1, 2, 3):
            assert q.claim("builder", token="w") == "a"
            assert q.moves.reap(stale=60) == []  # fresh: left alone
            _age(q, "doing", "a", 3600)
            assert q.moves.reap(stale=0.001) == [
                ("a", "doing", "failed" if attempt == 3 else "todo")
            ]
            state = q.where("a")
            assert state == (["failed"] if attempt == 3 else ["todo"])
            assert q.read(state[0], "a").attempts == attempt
            assert heartbeats(q) == {}
        assert q.read("failed", "a").sections("Attempt failed") == 3

    def test_a_reaped_verification_is_not_an_attempt(self, q):
        q.add("t", "x", task_id="a")
        q.claim("builder", token="b")
        q.moves.finish_build("a", "b", "rev1", "echo")
        assert q.claim("verifier", token="v") == "a"
        _age(q, "verifying", "a", 3600)
        assert q.moves.reap(stale=0.001) == [("a", "verifying", "review")]
        t = q.read("review", "a")
        assert t.attempts == 0 and t.meta["revision"] == "rev1"

    def test_a_reaped_worker_cannot_finish_over_the_next_claim(self, q):
        q.add("t", "x", task_id="a")
        q.claim("builder", token="old")
        _age(q, "doing", "a", 3600)
        q.moves.reap(stale=0.001)
        q.claim("builder", token="new")
        with pytest.raises(QueueError, match="no longer claimed"):
            q.moves.finish_build("a", "old", None, "echo")
        assert q.where("a") == ["doing"]
        q.moves.finish_build("a", "new", None, "echo")
        assert q.where("a") == ["review"]

    def test_reject_cap_and_passes(self, q):
        q.add("t", "x", task_id="a", verifiers=2)
        q.claim("builder", token="b")
        q.moves.finish_build("a", "b", "r", "claude")
        q.claim("verifier", token="v1")
        assert q.moves.verdict("a", "v1", True, "codex", "ok") == "review"  # one of two verifiers
        q.claim("verifier", token="v2")
        assert q.moves.verdict("a", "v2", False, "echo", "reject: tests fail") == "todo"
        t = q.read("todo", "a")
        assert t.attempts == 1 and t.meta["passes"] == [] and "tests fail" in t.body
        for n in (2, 3):
            q.claim("builder", token="b")
            q.moves.finish_build("a", "b", "r", "claude")
            q.claim("verifier", token="v")
            dst = q.moves.verdict("a", "v", False, "codex", "no")
            assert dst == ("failed" if n == 3 else "todo")
        assert q.read("failed", "a").sections("Reject") == 3

    def test_dependencies_wait_in_backlog_until_done(self, q):
        q.add("first", "x", task_id="a")
        q.add("second", "x", task_id="b")
        assert q.add("after both", "x", task_id="c", depends_on=["a", "b"]) == ("c", "backlog")
        for tid in ("a", "b"):
            assert q.claim("builder", token=tid) == tid
            q.moves.finish_build(tid, tid, None, "echo")
            q.claim("verifier", token=tid)
            q.moves.verdict(tid, tid, True, "codex", "ok")
            assert q.where("c") == (["todo"] if tid == "b" else ["backlog"])
        # added after its dependency is done: straight to todo/
        assert q.add("late", "x", task_id="d", depends_on=["a"]) == ("d", "todo")
