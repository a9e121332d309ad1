"""``orcr tasks land``: the merge queue over done/ (docs/tasks.md, "Landing"), on both
backends, with real git repositories and no agents: a task is built and verified by
hand through the queue's own moves (claim, finish_build, verdict), as a builder and
a verifier worker would, on a branch holding a real commit.

Crash safety is shown by SIGKILLing a real lander process (``ORCR_FAULT``) at every
step and landing again; concurrency by two lander processes on one queue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from orcr_tasks import status
from orcr_tasks.land.lander import Lander
from orcr_testing.tasks import age_claim, is_pg, spec, states_of

from orcr_core.kit.testing import until


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(short_tmp) -> Path:
    """A git repository on ``main`` with one commit: ``base.txt`` of five lines."""
    r = short_tmp / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    git(r, "config", "user.email", "t@example.com")
    git(r, "config", "user.name", "t")
    (r / "base.txt").write_text("".join(f"line {n}\n" for n in range(5)))
    git(r, "add", ".")
    git(r, "commit", "-qm", "base")
    return r


def commit_on(repo: Path, branch: str, files: dict[str, str], start: str = "main") -> str:
    """A commit on ``branch`` (made from ``start``) writing ``files``; back on main after."""
    git(repo, "checkout", "-q", "-B", branch, start)
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", f"{branch} change")
    rev = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return rev


def build_and_pass(q, repo: Path, tid: str, files: dict[str, str], add=True, start="main") -> str:
    """Task ``tid`` built on its own branch (a real commit) and passed by a verifier."""
    if add:
        q.add(f"change {tid}", "the check passes", task_id=tid)
    assert q.claim("builder", token="b") == tid
    branch = f"tasks/q/{tid}/a{q.read('doing', tid).attempts + 1}"
    rev = commit_on(repo, branch, files, start)
    q.moves.finish_build(tid, "b", rev, "echo", branch=branch)
    assert q.claim("verifier", token="v") == tid
    assert q.moves.verdict(tid, "v", True, "codex", "VERDICT: pass") == "done"
    return rev


def edit_by_hand(q, state: str, tid: str, **meta) -> None:
    """What a coordinator does outside orcr: edit the file, or the row."""
    task = q.read(state, tid)
    task.meta.update(meta)
    if is_pg(q):
        q._run(
            "UPDATE orcr_tasks SET meta = %s::jsonb WHERE queue = %s AND id = %s",
            [json.dumps(task.meta), q.queue, tid],
        )
    else:
        q.file(state, tid).write_text(task.render())


def lander(q, repo, **kw) -> Lander:
    return Lander(q, str(repo), say=lambda m: None, **kw)


def landed_commits(repo: Path, tid: str) -> int:
    """How many commits on main carry ``tid``'s change (its message)."""
    return git(repo, "log", "--format=%s", "main").splitlines().count(f"tasks/q/{tid}/a1 change")


def test_conflict_goes_back_with_the_file_named_then_lands_after_a_rebuild(q, repo):
    """Planted: a conflict treated as landable (apply's conflict ignored) -> fails."""
    build_and_pass(q, repo, "T1", {"base.txt": "one\n"})
    build_and_pass(q, repo, "T2", {"base.txt": "two\n"})
    counts = lander(q, repo).run()
    assert counts == {"landed": 1, "failed": 1}
    assert q.where("T1") == ["landed"] and q.where("T2") == ["todo"]
    t1, t2 = q.read("landed", "T1"), q.read("todo", "T2")
    assert t1.meta["landed_commit"] == git(repo, "rev-parse", "main")
    assert t2.attempts == 1 and t2.sections("Land failed") == 1
    assert "conflicts with main at" in t2.body and "base.txt" in t2.body
    assert (repo / "base.txt").read_text() == "one\n"  # the checkout followed main
    assert "tasks/q/T1/a1" not in git(repo, "branch", "--list")  # its branch went
    # the builder redoes it against the new main, and it lands
    build_and_pass(q, repo, "T2", {"base.txt": "one\ntwo\n"}, add=False)
    assert lander(q, repo).run() == {"landed": 1}
    assert (repo / "base.txt").read_text() == "one\ntwo\n"


def test_two_clean_changes_that_break_the_check_together(q, repo):
    """Each alone passes; both together fail the check: the second is sent back with
    the check's output. Planted: the check run in the repository instead of the
    scratch checkout (the tree it lands as) -> fails."""
    build_and_pass(q, repo, "T1", {"a.txt": "a\n"})
    build_and_pass(q, repo, "T2", {"b.txt": "b\n"})
    check = "if [ -e a.txt ] && [ -e b.txt ]; then echo 'a and b clash'; exit 3; fi"
    assert lander(q, repo, check=check).run() == {"landed": 1, "failed": 1}
    t2 = q.read("todo", "T2")
    assert "exit 3" in t2.body and "a and b clash" in t2.body
    assert git(repo, "ls-tree", "--name-only", "main").split() == ["a.txt", "base.txt"]


def test_a_branch_that_moved_during_the_check_is_retried_on_its_new_tip(q, repo):
    """Someone pushes to main while the check runs: the land retries on the new tip,
    and both land. Planted: no compare-and-swap (update-ref without the old value)
    -> the other commit is lost and this fails."""
    build_and_pass(q, repo, "T1", {"a.txt": "a\n"})
    marker = repo.parent / "moved-once"
    check = (
        f"if [ ! -e {marker} ]; then touch {marker}; "
        'git -C "$ORCR_LAND_REPO" commit -q --allow-empty -m other; fi'
    )
    assert lander(q, repo, check=check).run() == {"landed": 1}
    log = git(repo, "log", "--format=%s", "main").splitlines()
    assert log[:2] == ["tasks/q/T1/a1 change", "other"]
    assert q.read("landed", "T1").meta["landed_commit"] == git(repo, "rev-parse", "main")


def test_only_what_a_verifier_passed_lands(q, repo):
    """A branch that moved after its pass, and a task put in done/ by hand with no
    pass recorded for its revision, are refused to review/; main does not move.
    Planted: the refusal skipped (the branch tip or an unpassed revision landed)
    -> fails."""
    build_and_pass(q, repo, "T1", {"a.txt": "a\n"})
    build_and_pass(q, repo, "T2", {"b.txt": "b\n"})
    git(repo, "checkout", "-q", "tasks/q/T1/a1")
    (repo / "a.txt").write_text("changed after the pass\n")
    git(repo, "commit", "-qam", "late")
    git(repo, "checkout", "-q", "main")
    edit_by_hand(q, "done", "T2", revision=commit_on(repo, "elsewhere", {"c.txt": "c\n"}))
    before = git(repo, "rev-parse", "main")
    assert lander(q, repo).run() == {"refused": 2}
    t1, t2 = q.read("review", "T1"), q.read("review", "T2")
    assert "moved after its verifiers passed" in t1.body and t1.meta["passes"] == []
    assert "0 of the 1 verifier pass(es)" in t2.body
    assert git(repo, "rev-parse", "main") == before


def test_a_stale_landing_claim_is_taken_back_and_landed_once(q, repo):
    """A lander on another host went silent mid-land (its claim's heartbeat stale):
    the next lander returns the task to done/ and lands it. Planted: landing/ left
    out of the lander's recovery -> fails."""
    build_and_pass(q, repo, "T1", {"a.txt": "a\n"})
    info = {"pid": 1, "host": "elsewhere", "onto": "main"}
    assert q.claim("lander", token="gone", info=info) == "T1"
    q.write_heartbeat("T1", dict(info, token="gone", step="check"))
    age_claim(q, "T1", 3600)
    shown = status.render(status.compute(q, 60))
    assert "LANDER landing/T1: check onto main (pid 1 on elsewhere)" in shown
    assert "STALE landing/T1" in shown
    assert lander(q, repo, stale=60).run() == {"landed": 1}
    assert landed_commits(repo, "T1") == 1 and "Land reaped" in q.read("landed", "T1").body


STEPS = [
    "land.scratch",
    "land.applied",
    "land.check_started",
    "land.check_done",
    "land.intent",
    "land.ref_updated",
    "land.moved",
]

LAND = """
import sys
from orcr_tasks.opener import open_queue
from orcr_tasks import status
from orcr_tasks.land.lander import Lander
lander = Lander(open_queue(sys.argv[1]), sys.argv[2], check=sys.argv[3], heartbeat=5)
lander.run(batch=int(sys.argv[4]))
"""


def run_lander(q, repo, check: str, fault: str | None = None, batch: int = 1) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "ORCR_FAULT"}
    if fault:
        env["ORCR_FAULT"] = fault
    return subprocess.Popen(
        [sys.executable, "-c", LAND, spec(q), str(repo), check, str(batch)],
        env=env,
        stdout=subprocess.DEVNULL,
    )


def test_a_lander_killed_at_every_step_lands_each_task_exactly_once(q, repo):
    """At each step in turn, SIGKILL a real lander landing two tasks, then land again:
    every task landed once, main only ever at a checked commit, no scratch checkout
    or intent ref left. Planted: the intent ref not consulted on restart -> fails at
    land.ref_updated (T1 checked and landed again); recover() skipped -> fails at
    land.scratch (the task stays in landing/)."""
    tested = repo.parent / "tested"
    check = f"git rev-parse HEAD >> {tested}"
    for n, step in enumerate(STEPS):
        one, two = f"S{n}a", f"S{n}b"
        build_and_pass(q, repo, one, {f"{one}.txt": one})
        build_and_pass(q, repo, two, {f"{two}.txt": two})
        git(repo, "commit", "-q", "--allow-empty", "-m", "main moved")  # a real rebase
        before = git(repo, "rev-parse", "main")
        assert run_lander(q, repo, check, fault=step).wait(timeout=60) == -9, step
        lander(q, repo, check=check).run()
        assert states_of(q) == {t: ["landed"] for t in states_of(q)}, step
        assert landed_commits(repo, one) == 1 and landed_commits(repo, two) == 1, step
        on_main = git(repo, "rev-list", "--first-parent", f"{before}..main").split()
        checked = tested.read_text().split()
        assert set(on_main) <= set(checked), step  # never an unchecked commit
        if step in ("land.ref_updated", "land.moved"):  # on main before the kill: not again
            assert checked.count(q.read("landed", one).meta["landed_commit"]) == 1, step
        assert len(git(repo, "worktree", "list").splitlines()) == 1, step
        assert git(repo, "for-each-ref", "refs/orcr/") == "", step


def test_two_landers_at_once_land_each_task_once(q, repo):
    """Two lander processes drain one queue: the claim gives each task to one of them,
    the compare-and-swap makes the loser of a race retry. Planted: no compare-and-swap
    -> fails (a landing lost)."""
    ids = [f"T{n}" for n in range(1, 5)]
    for tid in ids:
        build_and_pass(q, repo, tid, {f"{tid}.txt": tid})
    procs = [run_lander(q, repo, "sleep 0.2") for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert states_of(q) == {tid: ["landed"] for tid in ids}
    assert [landed_commits(repo, tid) for tid in ids] == [1, 1, 1, 1]


def test_an_unverifiable_verdict_goes_to_the_inbox_never_to_done(q, repo):
    """``VERDICT: unverifiable <why>`` parks the task in inbox/ (not an attempt) and
    status counts it per cluster; nothing of it lands. Planted: unverifiable read as
    a pass (verdict_of) -> fails."""
    from orcr_tasks.prompts import UNVERIFIABLE, verdict_of

    answer = "I found no test runner.\nVERDICT: unverifiable pytest is not installed"
    assert verdict_of(answer) == UNVERIFIABLE
    assert verdict_of("VERDICT: pass") is True and verdict_of("VERDICT: reject no") is False
    q.add("change T1", "pytest passes", task_id="T1", cluster="api")
    assert q.claim("builder", token="b") == "T1"
    q.moves.finish_build("T1", "b", commit_on(repo, "tasks/q/T1/a1", {"a.txt": "a\n"}), "echo")
    assert q.claim("verifier", token="v") == "T1"
    q.moves.unverifiable("T1", "v", "codex", answer)
    t1 = q.read("inbox", "T1")
    assert t1.attempts == 0 and t1.sections("Unverifiable") == 1
    assert status.compute(q, 600)["clusters"]["api"]["unverifiable"] == 1
    assert lander(q, repo).run() == {}
    assert q.where("T1") == ["inbox"]


def test_the_cli_watches_for_done_tasks_and_releases_landed_dependants(q, repo):
    """``tasks land --watch --max 1`` waits for a task to reach done/, lands it (a real
    rebase: main moved), stops, and its dependant (``dependants = landed``) leaves
    backlog/ because its ``landed_commit`` is on main. Planted: the release after a
    landing left out -> fails."""
    q.set_settings({"dependants": "landed", "base": "main"})
    q.add("change T1", "x", task_id="T1")
    q.add("after T1", "x", task_id="T2", depends_on=["T1"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", "tasks", "land", spec(q), "--repo", str(repo),
         "--watch", "--max", "1", "--check", "test -e a.txt"],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, ORCR_HOME=str(repo.parent / "h")),
    )  # fmt: skip
    base = git(repo, "rev-parse", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "main moved")
    build_and_pass(q, repo, "T1", {"a.txt": "a\n"}, add=False, start=base)
    out, _ = proc.communicate(timeout=60)
    assert (
        proc.returncode == 0
        and out.splitlines()[-1] == "landed 1, failed 0, refused 0, returned 0, checks 1"
    )
    t1 = q.read("landed", "T1")
    assert t1.meta["landed_commit"] != t1.meta["revision"]  # rebased onto the moved main
    assert q.where("T2") == ["todo"]


def test_landings_and_land_failures_are_notified(q, repo, short_tmp, monkeypatch):
    """A landed task is a ``task_landed`` notification (off by default), a task sent
    back a ``land_failed`` one (on), each naming the task, the reason and the commit,
    from durable notices written by the move. Planted: no notice for a move out of
    landing/ (announce.prepare unchanged) -> fails."""
    from orcr_core.notify import notices, rules

    monkeypatch.setenv("ORCR_HOME", str(short_tmp / "home"))
    build_and_pass(q, repo, "T1", {"base.txt": "one\n"})
    build_and_pass(q, repo, "T2", {"base.txt": "two\n"})
    assert lander(q, repo).run() == {"landed": 1, "failed": 1}
    found = {}
    for path in sorted(notices.notices_dir().glob("*.json")):
        ev = json.loads(path.read_text())
        rule, subject, fields = rules.classify({"kind": ev["kind"], "data": ev["data"]}, {})
        found[rule] = (subject, fields["text"])
    landed = q.read("landed", "T1").meta["landed_commit"]
    assert found["task_landed"][0] == "T1" and landed in found["task_landed"][1]
    assert found["land_failed"][0] == "T2" and "base.txt" in found["land_failed"][1]
    assert rules.RULES["task_landed"][0] is False and rules.RULES["land_failed"][0] is True


def test_a_file_queue_made_before_landing_opens_and_lands(fq, repo):
    """A queue made by an orcr without landing/ and landed/ still opens (status, ls,
    workers) and its first lander makes them. Planted: landing/ and landed/ required
    by Queue.open -> fails."""
    from orcr_tasks.queue import Queue

    for folder in ("landing", "landed"):
        (fq.root / folder).rmdir()
    q = Queue.open(fq.root)
    assert status.compute(q, 600)["counts"]["landed"] == 0
    build_and_pass(q, repo, "T1", {"a.txt": "a\n"})
    assert lander(q, repo).run() == {"landed": 1}
    assert q.where("T1") == ["landed"]


def test_orcr_top_shows_the_lander_with_its_queue_task_and_step(fq, repo, orcr_home):
    """While a lander runs a check, ``orcr top --once`` has its line (queue, branch,
    task, step) and ``--json`` its activity; once it exits the line is gone. Planted:
    the lander's step not shown (``Lander.show`` a no-op) -> fails; the activity file
    left behind at exit (no ``close``) -> the pid is dead, so top still shows nothing,
    but the file stays: fails."""
    from orcr_core.kit.activities import activities_dir

    build_and_pass(fq, repo, "T1", {"a.txt": "a\n"})
    started, gate = repo.parent / "started", repo.parent / "go"
    check = f"touch {started}; while [ ! -e {gate} ]; do sleep 0.05; done"
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.cli", "tasks", "land", spec(fq), "--repo", str(repo),
         "--check", check], env=orcr_home.env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        until(started.exists, timeout=60, what="the check to start")
        frame = json.loads(orcr_home.run("top", "--once", "--json", check=True).stdout)
        [a] = frame["activities"]
        assert (a["kind"], a["name"], a["onto"], a["task"], a["step"]) == (
            "lander",
            fq.name,
            "main",
            "T1",
            "check",
        ), a
        text = orcr_home.run("top", "--once", check=True).stdout
        assert f"lander {fq.name} → main: T1 check · pid {proc.pid}" in text, text
    finally:
        gate.touch()
        out, _ = proc.communicate(timeout=60)
    assert out.splitlines()[-1].startswith("landed 1"), out
    assert list(activities_dir().glob("*.json")) == []
    assert "lander" not in orcr_home.run("top", "--once", check=True).stdout


# -- batches: tasks land --batch K (issue 37 item 5) ------------------------------


def on_main(repo) -> list[str]:
    """The files of main's tree."""
    return git(repo, "ls-tree", "--name-only", "main").split()


def test_a_batch_lands_with_one_check_and_bisects_to_the_red_task(q, repo):
    """Three green tasks: one check lands all three, each with its own commit (task i's
    holds the ones before it). Then four with T5 red (its file says BAD): the batch is
    red, bisected down to T5, sent back with the check's output, and the
    three others land: 5 checks for 4 tasks, each landed tree checked. Planted: no
    bisection (a red batch sent back whole) -> fails; the branch moved to the batch's
    head before its check -> fails (main holds BAD)."""
    base = git(repo, "rev-parse", "main")
    tested = repo.parent / "tested"
    check = f"git rev-parse HEAD >> {tested}; ! grep -q BAD *.txt"
    for n in (1, 2, 3):
        build_and_pass(q, repo, f"T{n}", {f"t{n}.txt": "ok\n"})
    ld = lander(q, repo, check=check)
    assert ld.run(batch=8) == {"landed": 3} and ld.checks == 1
    commits = [q.read("landed", f"T{n}").meta["landed_commit"] for n in (1, 2, 3)]
    assert git(repo, "rev-parse", "main") == commits[2]
    assert git(repo, "rev-parse", f"{commits[2]}^") == commits[1]  # one commit each, in order
    assert git(repo, "rev-parse", f"{commits[1]}^") == commits[0]
    for n in (4, 5, 6, 7):
        build_and_pass(q, repo, f"T{n}", {f"t{n}.txt": "BAD\n" if n == 5 else "ok\n"})
    ld = lander(q, repo, check=check)
    assert ld.run(batch=8) == {"landed": 3, "failed": 1}
    # [T4..T7] red, [T4 T5] red, [T4] green, [T5] red, [T6 T7] green
    assert ld.checks == 5
    t5 = q.read("todo", "T5")
    assert t5.attempts == 1 and "exit 1" in t5.body and "with it applied as" in t5.body
    assert "t5.txt" not in on_main(repo)
    assert {"t4.txt", "t6.txt", "t7.txt"} <= set(on_main(repo))
    # main only ever pointed at a commit the check ran on
    pointed = git(repo, "reflog", "--format=%H", "refs/heads/main").split()
    assert set(pointed) - {base} <= set(tested.read_text().split())


def test_a_task_conflicting_only_with_its_batch_is_tried_again_after_it(q, repo):
    """T1 and T2 both rewrite base.txt: in one batch T2 conflicts with T1, not with main,
    so it goes back to done/ (not an attempt) and, tried alone after T1 landed, back to
    todo/ as a conflict with main (an attempt). Planted: a batch conflict sent to todo/
    at once -> attempts 2 after the second try, fails."""
    build_and_pass(q, repo, "T1", {"base.txt": "one\n"})
    build_and_pass(q, repo, "T2", {"base.txt": "two\n"})
    build_and_pass(q, repo, "T3", {"c.txt": "c\n"})
    assert lander(q, repo).run(batch=3) == {"landed": 2, "returned": 1, "failed": 1}
    t2 = q.read("todo", "T2")
    assert t2.attempts == 1 and t2.sections("Land failed") == 1
    assert "conflicts with T1 of its batch (base.txt)" in t2.body
    assert states_of(q)["T1"] == ["landed"] and states_of(q)["T3"] == ["landed"]


@pytest.mark.parametrize("step", ["land.check_done", "land.intent", "land.ref_updated"])
def test_a_batch_lander_killed_lands_each_task_exactly_once(q, repo, step):
    """A batch lander SIGKILLed before, at and after its ref update, then a lander
    again: every task landed once with its own commit, not checked again once on main,
    no intent ref or scratch checkout left. Planted: intent refs written after the
    compare-and-swap -> fails at land.ref_updated (the batch checked and landed again:
    git's rebase drops the patches already on main, so both are marked with main's
    tip)."""
    assert step in STEPS
    for tid in ("A", "B"):
        build_and_pass(q, repo, tid, {f"{tid}.txt": tid})
    git(repo, "commit", "-q", "--allow-empty", "-m", "main moved")  # a real rebase
    tested = repo.parent / "tested"
    check = f"git rev-parse HEAD >> {tested}"
    proc = run_lander(q, repo, check, fault=step, batch=2)
    assert proc.wait(timeout=60) == -9
    lander(q, repo, check=check).run(batch=2)
    assert states_of(q) == {"A": ["landed"], "B": ["landed"]}
    assert landed_commits(repo, "A") == 1 and landed_commits(repo, "B") == 1
    for tid in ("A", "B"):  # each marked landed with its own commit
        commit = q.read("landed", tid).meta["landed_commit"]
        assert git(repo, "log", "-1", "--format=%s", commit) == f"tasks/q/{tid}/a1 change"
    checks = len(tested.read_text().split())
    assert checks == (1 if step == "land.ref_updated" else 2), step  # found, not checked again
    assert git(repo, "for-each-ref", "refs/orcr/") == ""
    assert len(git(repo, "worktree", "list").splitlines()) == 1
