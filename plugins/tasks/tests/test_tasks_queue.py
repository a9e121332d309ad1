"""The queue's rules, with real processes racing on a real filesystem and on a real
PostgreSQL: ``q`` is each backend in turn (conftest.py); ``fq`` the file queue only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from orcr_tasks.queue import STATES, QueueError
from orcr_tasks.status import compute
from orcr_tasks.taskfile import TaskFileError, parse
from orcr_tasks.worker import builder_prompt, last_line, pick_verifier_provider, verifier_prompt
from orcr_testing.conformance import QueueSuite
from orcr_testing.tasks import age_claim, heartbeats, move_by_hand, spec, states_of

from orcr_core.kit.testing import until


def cli(*args, env=None, input=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orcr_core.cli", "tasks", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        input=input,
        timeout=60,
    )


# -- where a queue may live ----------------------------------------------------


@pytest.mark.parametrize(
    "where, says",
    [
        ("repo/.git", "git worktree"),
        ("vault/.obsidian", "Obsidian vault"),
        ("Dropbox/x", "Dropbox"),
        ("Library/Mobile Documents/com~apple~CloudDocs/x", "iCloud"),
        ("Library/CloudStorage/GoogleDrive-me/x", "cloud storage"),
        ("OneDrive/x", "OneDrive"),
        ("Google Drive/x", "Google Drive"),
    ],
)
def test_init_refuses_worktrees_and_sync_folders(short_tmp, where, says):
    marker = short_tmp / where
    marker.mkdir(parents=True)
    target = marker.parent / "queue"
    r = cli("init", str(target))
    assert r.returncode == 1 and says in r.stderr and "refusing" in r.stderr, r.stderr
    assert not target.exists()


def test_init_makes_every_folder_and_is_idempotent(short_tmp):
    r = cli("init", str(short_tmp / "q"))
    assert r.returncode == 0 and r.stdout.strip() == str(short_tmp / "q")
    assert sorted(p.name for p in (short_tmp / "q").iterdir() if p.is_dir()) == sorted(
        [*STATES, "results", "hb", "quarantine"]
    )
    assert cli("init", str(short_tmp / "q")).returncode == 0
    (short_tmp / "notq").mkdir()
    (short_tmp / "notq" / "file").write_text("x")
    r = cli("init", str(short_tmp / "notq"))
    assert r.returncode == 1 and "not empty" in r.stderr


# -- adding -------------------------------------------------------------------------


def test_add_writes_a_task_file_with_front_matter(q):
    r = cli(
        "add",
        spec(q),
        "--id",
        "T12",
        "--done-when",
        "pytest passes",
        "--cluster",
        "billing",
        "--provider",
        "echo",
        "--verifiers",
        "2",
        "--",
        "Port",
        "billing",
    )
    assert r.stdout == "T12 todo\n", r.stderr
    t = parse(q.text("todo", "T12"))
    assert t.meta["done_when"] == "pytest passes" and t.meta["attempts"] == 0
    assert (t.meta["cluster"], t.meta["provider"], t.verifiers) == ("billing", "echo", 2)
    assert t.text == "Port billing" and t.depends_on == []
    # the same id twice, a bad id, an unknown dependency, no text: clear errors, nothing written
    for args, says in [
        (["--id", "T12"], "already exists (in todo/)"),
        (["--id", "a/b"], "not allowed"),
        (["--depends-on", "nope"], "names no task"),
    ]:
        r = cli("add", spec(q), *args, "--done-when", "x", "--", "text")
        assert r.returncode == 1 and says in r.stderr, r.stderr
    r = cli("add", spec(q), "--done-when", "x", "-", input="from stdin\n")
    assert r.stdout == "T2 todo\n" and q.read("todo", "T2").text == "from stdin"
    assert sorted(states_of(q)) == ["T12", "T2"]


def test_every_verb_reads_the_queue_from_the_environment(q):
    env = {"ORCR_TASKS_DIR": spec(q)}
    assert cli("add", "--id", "a", "--done-when", "x", "--", "do", env=env).stdout == "a todo\n"
    assert cli("show", "a", env=env).stdout.startswith('---\nid: "a"')
    assert "todo" in cli("ls", env=env).stdout
    assert json.loads(cli("status", "--json", env=env).stdout)["counts"]["todo"] == 1
    r = cli("show", "a")
    assert r.returncode == 2 and "ORCR_TASKS_DIR" in r.stderr


# -- claims ---------------------------------------------------------------------------


def open_gate(logs: list[Path], go: Path) -> None:
    """Wait until every process has written its ``<log>.ready`` (imported, queue open),
    then let them all go at once (RACER's and WORKER's start gate)."""
    until(lambda: all(Path(f"{log}.ready").exists() for log in logs), 120, "all at the gate")
    go.touch()


RACER = """
import json, os, sys
from orcr_tasks.opener import open_queue
import time
q = open_queue(sys.argv[1])
out = open(sys.argv[2], "w")
open(sys.argv[2] + ".ready", "w").close()
while not os.path.exists(sys.argv[3]):  # the start gate: all 16 claim from the same moment
    time.sleep(0.01)
while True:
    tid = q.claim("builder", token=str(os.getpid()))
    if tid is None:
        break
    out.write(tid + "\\n")
    out.flush()
"""


def test_sixteen_processes_race_for_two_hundred_tasks(q, short_tmp):
    for n in range(200):
        q.add(f"task {n}", "x", task_id=f"t{n:03d}")
    logs = [short_tmp / f"claims{i}.txt" for i in range(16)]
    go = short_tmp / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, spec(q), str(log), str(go)]) for log in logs
    ]
    # opened, then held at the gate: the first to start cannot take all 200 before the
    # last has imported (it did on PostgreSQL under load: a rerun)
    open_gate(logs, go)
    assert [p.wait(120) for p in procs] == [0] * 16
    claims = [ln for log in logs for ln in log.read_text().split()]
    assert len(claims) == 200 and len(set(claims)) == 200  # none twice, none lost
    assert sum(1 for log in logs if log.read_text()) > 1  # it was a race
    assert q.ids("todo") == [] and len(q.ids("doing")) == 200
    assert all(v == ["doing"] for v in states_of(q).values())
    hb = {h["token"] for h in heartbeats(q).values()}
    assert len(hb) > 1


WORKER = """
import os, sys, time
from orcr_tasks.opener import open_queue
from orcr_tasks.worker import Worker

class Agentless:  # the SDK's shape; answers at once, so the race is all in the files
    n = 0
    def run(self, prompt, **kw):
        Agentless.n += 1
        return {"path": kw["path"], "uuid": str(Agentless.n)}
    def wait(self, uuid, until, timeout):
        pass
    def read(self, uuid):
        return {"text": "built\\nREVISION: r1"}
    def kill(self, uuid):
        pass
    def close(self):
        pass

queue = open_queue(sys.argv[1])
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):  # the start gate, as RACER's
    time.sleep(0.01)
Worker(queue, "builder", slots=2, drain=True, sdk_factory=Agentless).run()
"""


def every_log(logs) -> str:
    """Every worker's whole log, for a failure's message."""
    return "\n".join(f"--- {log.name} ---\n{log.read_text()}" for log in logs)


def tally(done: list[str], of: int = 200) -> str:
    """What went wrong with ``done`` (task ids, one per build or claim), first in a
    failure's message: a rerun's reason keeps only its first lines, and 16 logs' headers
    filled them once (CI, a PostgreSQL leg), so whether a task was built twice or never
    was lost."""
    twice = sorted(t for t, n in Counter(done).items() if n > 1)
    never = sorted({f"t{n:03d}" for n in range(of)} - set(done))
    return f"{len(done)} of {of}; twice: {twice[:20]}; never: {never[:20]}"


def test_sixteen_worker_processes_build_two_hundred_tasks_once_each(q, short_tmp):
    """The whole builder loop (claim, heartbeat, results, the locked finish) in 16
    processes of 2 slots each; counted from the files and the workers' logs."""
    for n in range(200):
        q.add(f"task {n}", "x", task_id=f"t{n:03d}")
    logs = [short_tmp / f"worker{i}.log" for i in range(16)]
    go, procs = short_tmp / "go", []
    for log in logs:
        with open(log, "w") as fh:
            argv = [sys.executable, "-c", WORKER, spec(q), f"{log}.ready", str(go)]
            procs.append(subprocess.Popen(argv, stderr=fh))
    # held at the gate until all 16 have imported and opened the queue: with Agentless
    # answering at once, the first to start built all 200 alone before the others had
    # imported (CI, the PostgreSQL leg: "it was a race" below failed, then passed rerun)
    open_gate(logs, go)
    assert [p.wait(300) for p in procs] == [0] * 16, every_log(logs)
    built = [
        ln.split()[3].rstrip(":")
        for log in logs
        for ln in log.read_text().splitlines()
        if ln.endswith("built -> review/")
    ]
    assert len(built) == 200 and len(set(built)) == 200, f"{tally(built)}\n{every_log(logs)}"
    builders = sum(1 for log in logs if "built" in log.read_text())
    assert builders > 1, f"{builders} worker built them all\n{every_log(logs)}"  # a race
    assert all(v == ["review"] for v in states_of(q).values()) and len(states_of(q)) == 200, (
        every_log(logs)
    )
    assert all(q.results(tid) == "built\nREVISION: r1\n" for tid in states_of(q))
    assert heartbeats(q) == {} and q.lock_status() is None


# -- the reaper, attempts and the cap ------------------------------------------------------


# -- dependencies, inbox --------------------------------------------------------------------


def test_park_and_answer(q):
    q.add("t", "x", task_id="a")
    q.claim("builder", token="w")
    q.moves.park("a", "w", "which port?")
    assert q.where("a") == ["inbox"] and heartbeats(q) == {}
    r = cli("answer", spec(q), "a", "use", "8080")
    assert r.stdout == "a todo\n", r.stderr
    t = q.read("todo", "a")
    assert "which port?" in t.body and "use 8080" in t.body and t.attempts == 0
    r = cli("answer", spec(q), "a", "again")
    assert r.returncode == 1 and "not inbox/" in r.stderr


# -- prompts and verdicts ----------------------------------------------------------------------


def test_verifier_prompt_has_the_condition_and_revision_not_the_builders_report(q):
    q.add("Say hello.", "VERDICT: pass", task_id="a")
    q.claim("builder", token="w")
    report = "I did it brilliantly. REASONING-SECRET"
    q.moves.finish_build("a", "w", "abc123", "claude", results=report)
    assert q.results("a") == report
    q.claim("verifier", token="v")
    t = q.read("verifying", "a")
    t.append("Answer (x)", "ANSWER-SECRET")  # sections after the task text are not shown
    p = verifier_prompt(t)
    assert p.startswith("VERDICT: pass\n") and "abc123" in p and "Say hello." in p
    assert "SECRET" not in p
    assert spec(q) not in p and q.name not in p  # never pointed at the queue
    assert builder_prompt(q, t).startswith("Say hello.") and "ANSWER-SECRET" in builder_prompt(q, t)


def test_answer_lines():
    text = "work\nREVISION: abc\nmore\n**VERDICT:** no\nVERDICT: reject tests fail\n"
    assert last_line(text, "REVISION") == "abc"
    assert last_line(text, "VERDICT") == "reject tests fail"
    assert last_line("a line that mentions VERDICT: inline", "VERDICT") is None
    assert last_line(None, "QUESTION") is None


def test_verifiers_use_another_provider_where_one_is_available():
    assert pick_verifier_provider("claude", [], ["claude", "codex"]) == "codex"
    assert pick_verifier_provider("codex", [], ["claude", "codex"]) == "claude"
    assert pick_verifier_provider("claude", ["codex"], ["claude", "codex", "echo"]) == "echo"
    assert pick_verifier_provider("claude", ["codex"], ["claude", "codex"]) == "codex"
    assert pick_verifier_provider("claude", [], ["claude"]) == "claude"  # nothing else
    assert pick_verifier_provider("claude", [], []) == "claude"


# -- status -------------------------------------------------------------------------------------


def test_status_is_computed_from_the_files(q):
    q.add("a", "x", task_id="a", cluster="api")
    q.add("b", "x", task_id="b", cluster="api")
    q.add("c", "x", task_id="c", cluster="db")
    q.add("d", "x", task_id="d", depends_on=["c"])
    for tid in ("a", "b"):
        q.claim("builder", token=tid)
        q.moves.finish_build(tid, tid, None, "claude")
    q.claim("verifier", token="v")  # a (oldest first)
    q.moves.verdict("a", "v", True, "codex", "ok")
    q.claim("verifier", token="v")
    q.moves.verdict("b", "v", False, "codex", "no")
    q.claim("builder", token="w")  # c (b went back to todo/ after it)
    age_claim(q, "c", 3600)
    s = compute(q, stale=600)
    assert s["counts"] == dict.fromkeys(STATES, 0) | {
        "done": 1,
        "todo": 1,
        "doing": 1,
        "backlog": 1,
    }
    assert s["clusters"]["api"] == {
        "tasks": 2,
        "rejects": 1,
        "passes": 1,
        "unverifiable": 0,
        "reject_rate": 0.5,
    }
    assert s["clusters"]["db"]["reject_rate"] is None
    assert [r["id"] for r in s["stale"]] == ["c"]
    assert s["attempts"] == {"total": 1, "tasks_retried": 1, "max": 1}
    assert s["done_last_hour"] == 1 and s["oldest"]["done"]["id"] == "a"
    # a file moved by hand is counted where it is now: nothing is remembered
    move_by_hand(q, "a", "done", "failed")
    s = compute(q, stale=600)
    assert (s["counts"]["done"], s["counts"]["failed"], s["done_last_hour"]) == (0, 1, 0)
    r = cli("status", spec(q))
    assert (
        "cluster api: 2 task(s), 1 reject(s), 1 pass(es), 0 unverifiable, reject rate 50%"
        in r.stdout
    )
    assert "STALE doing/c" in r.stdout


# -- the lock --------------------------------------------------------------------------------------

HOLDER = """
import sys, time
from orcr_tasks.queue import Queue
q = Queue(sys.argv[1])
q.lock.acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_a_stale_lock_is_cleared_only_when_its_owner_is_dead(fq):
    q = fq
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(q.root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline() == "held\n"
        r = cli("unlock", str(q.root))
        assert r.returncode == 1 and "alive" in r.stderr and q.lock.path.exists()
        with pytest.raises(Exception, match="held by pid"):
            q.lock.acquire(timeout=0.2, on_dead=q.recover)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert q.lock.path.exists()  # a SIGKILLed holder leaves it behind
    assert cli("unlock", str(q.root)).stdout == "cleared the lock\n"
    assert not q.lock.path.exists()
    assert cli("unlock", str(q.root)).stdout == "the queue is not locked\n"


def test_a_dead_owners_lock_is_taken_over_by_the_next_waiter(fq):
    q = fq
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(q.root)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline() == "held\n"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert q.add("t", "x", task_id="a") == ("a", "todo")  # waited, saw the owner dead
    assert not q.lock.path.exists()


def test_an_owner_on_another_host_needs_force(fq):
    q = fq
    q.lock.path.mkdir()
    (q.lock.path / "owner").write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": 0}))
    r = cli("unlock", str(q.root))
    assert r.returncode == 1 and "--force" in r.stderr
    assert cli("unlock", str(q.root), "--force").returncode == 0
    assert not Path(q.lock.path).exists()
    until(lambda: not q.lock.path.exists(), what="lock gone")


def test_installed_model_families_are_the_default_verifier_providers(tmp_path, monkeypatch):
    from orcr_tasks.worker import installed_families

    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert installed_families() == ["codex"]
    # a task built with claude is verified with codex, the other family installed
    assert pick_verifier_provider("claude", [], installed_families()) == "codex"


def test_an_answered_question_does_not_park_again(q):
    from orcr_tasks.worker import answered_questions

    q.add("Migrate.\nQUESTION: which db?", "x", task_id="a")
    q.claim("builder", token="w")
    q.moves.park("a", "w", "which db?")
    assert answered_questions(q.read("inbox", "a")) == set()  # asked, not answered yet
    q.moves.answer("a", "postgres")
    assert answered_questions(q.read("todo", "a")) == {"which db?"}


class FakeOrcr:
    """Stands in for the SDK where no agent needs to run: ``during_wait`` runs while
    the worker waits on its agent (as another process would)."""

    def __init__(self, answer: str, during_wait=None):
        self.answer, self.during_wait = answer, during_wait
        self.prompts, self.killed = [], []

    def run(self, prompt, **kw):
        self.prompts.append(prompt)
        self.options = kw
        return {"path": kw["path"], "uuid": f"u{len(self.prompts)}"}

    def wait(self, uuid, until, timeout):
        if self.during_wait:
            self.during_wait()

    def read(self, uuid):
        return {"text": self.answer, "turn_status": "completed"}

    def kill(self, uuid):
        self.killed.append(uuid)

    def close(self):
        pass


def test_a_reaped_builder_writes_no_results_and_moves_nothing(q):
    from orcr_tasks.worker import Worker

    q.add("t", "x", task_id="a")
    assert q.claim("builder", token="old") == "a"

    def reaped_and_reclaimed():
        age_claim(q, "a", 3600)
        q.moves.reap(stale=60)
        assert q.claim("builder", token="new") == "a"

    fake = FakeOrcr("done\nREVISION: r", during_wait=reaped_and_reclaimed)
    w = Worker(q, "builder")
    with pytest.raises(QueueError, match="no longer claimed"):
        w.build(fake, "a", "old")
    assert q.results("a") is None  # one writer: the holder of the claim
    assert q.where("a") == ["doing"] and q.holds("a", "doing", "new")
    assert fake.killed == ["u1"]


def test_worker_builds_and_verifies_with_the_agents_answers(q):
    from orcr_tasks.worker import Worker

    q.add("t", "x", task_id="a", provider="claude")
    assert q.claim("builder", token="b") == "a"
    Worker(q, "builder").build(FakeOrcr("did it\nREVISION: r9"), "a", "b")
    assert q.read("review", "a").meta["built_by"] == "claude"
    assert q.results("a") == "did it\nREVISION: r9\n"
    assert q.claim("verifier", token="v") == "a"
    fake = FakeOrcr("ran it\nVERDICT: pass")
    Worker(q, "verifier", providers=["claude", "codex"]).verify(fake, "a", "v")
    t = q.read("done", "a")
    assert t.meta["passes"] == ["codex"]  # not the builder's provider
    assert "r9" in fake.prompts[0] and "did it" not in fake.prompts[0]
    assert spec(q) not in fake.prompts[0]


def test_a_slot_survives_an_unexpected_error_and_leaves_the_claim_to_the_reaper(q):
    from orcr_tasks.worker import Worker

    class Flaky(FakeOrcr):
        def read(self, uuid):
            if uuid == "u1":
                raise RuntimeError("something unexpected")
            return super().read(uuid)

    q.add("first", "x", task_id="a")
    q.add("second", "x", task_id="b")
    import io

    log = io.StringIO()
    Worker(q, "builder", drain=True, sdk_factory=lambda: Flaky("ok"), log=log).run()
    assert q.where("a") == ["doing"] and q.where("b") == ["review"]
    assert "a: RuntimeError: something unexpected; leaving it to the reaper" in log.getvalue()


def test_a_refused_agent_gives_the_task_back_and_stops_the_worker(q):
    """A worker started with a wrong provider must not use up every task's attempts."""
    import io

    from orcr_tasks.worker import Worker

    from orcr_core.sdk.client import ServerError

    class Refusing(FakeOrcr):
        def run(self, prompt, **kw):
            raise ServerError("invalid_provider", "unknown provider 'nosuch'")

    q.add("first", "x", task_id="a")
    q.add("second", "x", task_id="b")
    log = io.StringIO()
    w = Worker(q, "builder", drain=True, sdk_factory=lambda: Refusing("ok"), log=log)
    with pytest.raises(QueueError, match="unknown provider 'nosuch'"):
        w.run()
    for tid in ("a", "b"):
        t = q.read("todo", tid)
        assert t.attempts == 0 and t.sections("Attempt failed") == 0
    assert heartbeats(q) == {}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ({"text": "  "}, "the task text is empty"),
        ({"done_when": ""}, "--done-when is empty"),
        ({"verifiers": 0}, "--verifiers 0: a task needs at least 1 verifier"),
        ({"task_id": "bad id!"}, "task id 'bad id!' is not allowed"),
        ({"task_id": ""}, "task id '' is not allowed"),
        ({"depends_on": ["../up"]}, "task id '../up' is not allowed"),
    ],
)
def test_a_bad_add_is_refused_the_same_on_either_backend(q, args, said):
    """``tasks add``'s own checks (backend.check_new_task, shared by both backends):
    each names what was wrong, and no task is written."""
    kwargs = {"text": "the task", "done_when": "the tests pass", **args}
    with pytest.raises((QueueError, TaskFileError)) as exc:
        q.add(kwargs.pop("text"), kwargs.pop("done_when"), **kwargs)
    assert said in str(exc.value)
    assert all(q.ids(s) == [] for s in STATES)


def test_work_sandbox_reaches_every_agent(q):
    """tasks work --sandbox: the builder's agent is admitted with sandbox=True; without
    the flag nothing is sent and orcr's [sandbox] default applies (planted: the option
    not passed on -> fails)."""
    from orcr_tasks.worker import Worker

    q.add("t", "x", task_id="a")
    assert q.claim("builder", token="b") == "a"
    fake = FakeOrcr("did it\nREVISION: r9")
    Worker(q, "builder", sandbox=True).build(fake, "a", "b")
    assert fake.options["sandbox"] is True
    q.add("t", "x", task_id="c")
    assert q.claim("builder", token="d") == "c"
    Worker(q, "builder").build(fake, "c", "d")
    assert "sandbox" not in fake.options


class TestQueueBackends(QueueSuite):
    """The backend suite (orcr_testing.conformance.QueueSuite) on both backends:
    ``q`` (conftest.py) is the file queue and PostgreSQL in turn. Planted: a failed
    attempt not counted (moves._fail's ``t.attempts + 1`` made ``t.attempts``) ->
    the reaper and reject-cap tests fail."""
