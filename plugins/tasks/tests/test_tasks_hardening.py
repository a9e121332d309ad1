"""Bad files, odd input and the lock's neighbours: the queue never wedges, crashes or
loses a file (issue 20, items 1, 2, 4-12, 38, 39)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import pytest
from orcr_tasks.lock import LockBusy
from orcr_tasks.queue import QUARANTINE, STATES, Queue, QueueError
from orcr_tasks.status import compute, render
from orcr_tasks.taskfile import TaskFileError, parse
from orcr_tasks.worker import Worker


@pytest.fixture
def q(short_tmp) -> Queue:
    return Queue.init(short_tmp / "queue")


def cli(*args, env=None, input=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orcr_core.cli", "tasks", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        input=input,
        timeout=60,
    )


def old(path, seconds: float = 60) -> None:
    """Age a hand-written file past the grace an unreadable file gets."""
    past = time.time() - seconds
    os.utime(path, (past, past), follow_symlinks=False)


#: name -> how to make the bad entry in a state folder, and what the reason says
BAD = {
    "nofm": (lambda p: p.write_text("no frontmatter\n"), "does not start with"),
    "emptyfm": (lambda p: p.write_text("---\n---\nbody\n"), "front matter block is empty"),
    "bin": (lambda p: p.write_bytes(b'---\nid: "bin"\n---\n\xff\xfe\xfa caf\xe9'), "UTF-8"),
    "dir": (lambda p: p.mkdir(), "not a regular file"),
    "lots": (lambda p: p.write_text('---\nid: "lots"\nattempts: "lots"\n---\nx\n'), "attempts"),
    "bad5": (lambda p: p.write_text('---\nid: "other"\n---\nx\n'), "says id 'other'"),
    "badjson": (lambda p: p.write_text('---\nid: "badjson"\ndepends_on: [\n---\nx\n'), "JSON"),
}


def plant(q: Queue, state: str) -> None:
    for name, (make, _says) in BAD.items():
        make(q.file(state, name))
        old(q.file(state, name))


# -- item 1: an unreadable file is never claimed, never stops a reap or a worker ----------


def test_an_unreadable_file_is_never_claimed_but_moved_aside_as_it_is(q):
    plant(q, "todo")
    q.add("good", "x", task_id="good")
    seen = []
    assert q.claim("builder", "w", on_unreadable=lambda *a: seen.append(a)) == "good"
    assert sorted(tid for tid, _moved, _why in seen) == sorted(BAD)
    for tid, moved, why in seen:
        assert moved == f"{QUARANTINE}/{tid}.md" and BAD[tid][1] in why, (tid, why)
    assert q.ids("todo") == [] and q.ids("doing") == ["good"]
    assert sorted(q.ids(QUARANTINE)) == sorted(BAD)  # nothing lost, content as it was
    assert (q.root / QUARANTINE / "bin.md").read_bytes().endswith(b"caf\xe9")
    # the same name going bad again does not replace the first one
    (q.file("todo", "nofm")).write_text("still no frontmatter\n")
    old(q.file("todo", "nofm"))
    assert q.claim("builder", "w") is None
    assert (q.root / QUARANTINE / "nofm~2.md").read_text() == "still no frontmatter\n"
    assert (q.root / QUARANTINE / "nofm.md").read_text() == "no frontmatter\n"


def test_an_unreadable_file_being_written_is_skipped_not_moved(q):
    q.file("todo", "young").write_text('---\nid: "you')  # a coordinator mid-write
    assert q.claim("builder", "w") is None
    assert q.ids("todo") == ["young"] and q.ids(QUARANTINE) == []


def test_a_verifier_never_claims_an_unreadable_review_file(q):
    q.file("review", "r").write_text("garbage\n")
    old(q.file("review", "r"))
    assert q.claim("verifier", "v") is None and q.ids(QUARANTINE) == ["r"]


def test_a_stale_unreadable_claim_never_stops_a_reap(q):
    q.add("t", "x", task_id="a")
    assert q.claim("builder", "w") == "a"
    q.file("doing", "bad2").write_text("no frontmatter\n")  # claimed by an older orcr
    q.file("verifying", "bad3").write_text("---\n---\n")
    for tid in ("a", "bad2", "bad3"):
        q.write_heartbeat(tid, {"token": "x"})
        old(q.hb(tid), 3600)
    reaped = q.moves.reap(stale=60)
    assert sorted(reaped) == [
        ("a", "doing", "todo"),
        ("bad2", "doing", QUARANTINE),
        ("bad3", "verifying", QUARANTINE),
    ]
    assert q.read("todo", "a").attempts == 1
    assert sorted(q.ids(QUARANTINE)) == ["bad2", "bad3"] and not q.hb("bad2").exists()


def test_a_worker_moves_bad_files_aside_and_works_the_rest(q):
    plant(q, "todo")
    q.file("doing", "stale").write_text("no frontmatter\n")
    q.write_heartbeat("stale", {"token": "gone"})
    old(q.hb("stale"), 3600)
    q.add("good", "x", task_id="good")
    log = io.StringIO()

    class Fake:
        def run(self, prompt, **kw):
            return {"path": kw["path"], "uuid": "u1"}

        def wait(self, uuid, until, timeout):
            pass

        def read(self, uuid):
            return {"text": "ok\nREVISION: r", "turn_status": "completed"}

        def kill(self, uuid):
            pass

        def close(self):
            pass

    w = Worker(q, "builder", drain=True, stale=60, sdk_factory=Fake, log=log)
    w.run()  # the slot thread lives through it: no traceback, no exit
    assert q.where("good") == ["review"]
    assert sorted(q.ids(QUARANTINE)) == sorted([*BAD, "stale"])
    lines = log.getvalue().splitlines()
    for tid in BAD:
        [line] = [ln for ln in lines if f"] {tid}: not a readable task" in ln]
        assert f"moved to {QUARANTINE}/{tid}.md" in line
    assert any("stale: doing/stale.md is not a readable task -> quarantine/" in ln for ln in lines)


# -- item 2: ls and status never crash --------------------------------------------------


def test_ls_and_status_list_unreadable_files_with_the_reason(q):
    plant(q, "todo")
    (q.root / "todo" / "raw.md").write_bytes(os.urandom(3000))
    old(q.root / "todo" / "raw.md")  # past the grace a file being written gets
    q.add("fine", "x", task_id="fine")
    r = cli("ls", str(q.root))
    assert r.returncode == 0, r.stderr
    for tid, (_make, says) in BAD.items():
        [line] = [ln for ln in r.stdout.splitlines() if ln.startswith(tid + " ")]
        assert "UNREADABLE" in line and says in line, line
    rows = json.loads(cli("ls", str(q.root), "--json").stdout)
    assert {r["id"]: r["unreadable"] is None for r in rows}["fine"] is True
    r = cli("status", str(q.root))
    assert r.returncode == 0, r.stderr
    for tid, (_make, says) in BAD.items():
        assert any(
            ln.startswith(f"  UNREADABLE todo/{tid}.md") and says in ln
            for ln in r.stdout.splitlines()
        ), r.stdout
    s = json.loads(cli("status", str(q.root), "--json").stdout)
    assert s["counts"]["todo"] == len(BAD) + 2
    q.claim("builder", "w")  # moves them aside
    s = compute(q, stale=600)
    assert s["unreadable"] == [] and len(s["quarantined"]) == len(BAD) + 1
    assert "QUARANTINED quarantine/bad5.md" in render(s)


# -- item 10: stuck backlog, odd ids, malformed values -------------------------------------


def test_status_says_why_a_backlog_task_is_stuck(q):
    q.add("dep", "x", task_id="f")
    for _ in range(3):
        q.claim("builder", "w")
        q.moves.fail_build("f", "w", "no")
    assert q.where("f") == ["failed"]
    for tid, deps in {"ghosted": ["ghost"], "cy1": ["cy2"], "cy2": ["cy1"], "onf": ["f"],
                      "after": ["cy1"]}.items():  # fmt: skip
        meta = {"id": tid, "depends_on": deps, "done_when": "x", "attempts": 0}
        text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in meta.items()) + "---\nt\n"
        q.file("backlog", tid).write_text(text)
    s = compute(q, stale=600)
    why = {r["id"]: r["why"] for r in s["stuck"]}
    assert "ghost" in why["ghosted"] and "missing" in why["ghosted"]
    assert "cycle cy1 -> cy2 -> cy1" in why["cy1"] and "cycle" in why["cy2"]
    assert "failed dependency" in why["onf"]
    assert "cy1, which is stuck" in why["after"]
    assert "STUCK backlog/ghosted: depends on ghost" in render(s)


def test_an_empty_id_and_malformed_json_values_are_refused(q):
    r = cli("add", str(q.root), "--id", "", "--done-when", "x", "--", "text")
    assert r.returncode == 1 and "task id '' is not allowed" in r.stderr, r.stderr
    assert q.ids("todo") == []
    for raw in ("[", '["a",', "{", '"open'):
        with pytest.raises(TaskFileError, match="not a valid JSON value"):
            parse(f'---\nid: "a"\ndepends_on: {raw}\n---\nx\n')
    assert parse("---\nid: T12\ncluster: api\n---\nx\n").meta["cluster"] == "api"  # bare words
    with pytest.raises(TaskFileError, match="depends_on"):
        parse('---\nid: "a"\ndepends_on: "b"\n---\nx\n')


# -- items 8, 39: the lock --------------------------------------------------------------


def test_a_lock_made_by_mkdir_is_never_taken_over(q):
    q.lock.path.mkdir()  # the playbook's own idiom, from a script beside orcr
    with pytest.raises(LockBusy, match="not made by orcr"):
        with q.locked(timeout=0.3):
            pass
    assert q.lock.path.is_dir() and list(q.lock.path.iterdir()) == []
    r = cli("unlock", str(q.root))
    assert r.returncode == 1 and "no owner file" in r.stderr and "mkdir .lock" in r.stderr
    assert q.lock.path.is_dir()
    os.rmdir(q.lock.path)  # the script is done
    assert q.add("t", "x", task_id="a") == ("a", "todo")


def test_no_lock_directory_is_left_behind_after_a_run_of_moves(q):
    for n in range(5):
        q.add("t", "x", task_id=f"t{n}")
    for n in range(5):
        q.claim("builder", "b")
        q.moves.finish_build(f"t{n}", "b", "r", "echo", results="report\n")
        q.claim("verifier", "v")
        q.moves.verdict(f"t{n}", "v", n % 2 == 0, "codex", "ok")
    q.moves.reap(stale=3600)
    q.moves.release()
    left = [p.name for p in q.root.iterdir() if p.name.startswith(".lock")]
    assert left == [], left


# -- item 38: a claim is one rename ---------------------------------------------------------


def test_a_claim_keeps_the_files_inode_and_never_shows_two_copies(q, short_tmp):
    q.add("t", "x", task_id="a")
    before = os.stat(q.file("todo", "a"))
    assert q.claim("builder", "w") == "a"
    after = os.stat(q.file("doing", "a"))
    assert (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)
    q.add("t", "x", task_id="b")
    ino = os.stat(q.file("todo", "b")).st_ino
    env = dict(os.environ, ORCR_FAULT="tasks.claim.renamed")
    code = "import sys; from orcr_tasks.queue import Queue; Queue(sys.argv[1]).claim('builder')"
    p = subprocess.run([sys.executable, "-c", code, str(q.root)], env=env)
    assert p.returncode == -9  # killed between the claim's rename and its heartbeat
    assert [s for s in STATES if q.file(s, "b").exists()] == ["doing"]
    assert os.stat(q.file("doing", "b")).st_ino == ino


# -- item 9: one writer, under the lock --------------------------------------------------------


def test_the_results_file_is_written_under_the_lock_by_the_holder(q, monkeypatch):
    q.add("t", "x", task_id="a")
    q.claim("builder", "old")
    written = []
    real_replace = os.replace

    def spy_replace(src, dst):
        written.append((str(dst), q.lock.path.exists()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy_replace)
    q.moves.finish_build("a", "old", "r", "echo", results="report\n")
    assert (str(q.root / "results" / "a.md"), True) in written, written
    assert (q.root / "results" / "a.md").read_text() == "report\n" and q.where("a") == ["review"]
    # a reaped builder's late finish writes nothing
    q.add("t", "x", task_id="b")
    q.claim("builder", "late")
    old(q.hb("b"), 3600)
    q.moves.reap(stale=60)
    with pytest.raises(QueueError, match="no longer claimed"):
        q.moves.finish_build("b", "late", "r", "echo", results="late report\n")
    assert not (q.root / "results" / "b.md").exists()
    assert [p.name for p in (q.root / "results").iterdir()] == ["a.md"]  # no temp left


# -- items 4, 5: what an agent's answer does -------------------------------------------------


class Fake:
    def __init__(self, read):
        self._read, self.prompts, self.cwds = read, [], []

    def run(self, prompt, **kw):
        self.prompts.append(prompt)
        self.cwds.append(kw.get("cwd"))
        return {"path": kw["path"], "uuid": "u1"}

    def wait(self, uuid, until, timeout):
        pass

    def read(self, uuid):
        return self._read

    def kill(self, uuid):
        pass

    def close(self):
        pass


def test_a_failed_attempt_records_the_turns_error(q):
    q.add("t", "x", task_id="a")
    q.claim("builder", "w")
    log = io.StringIO()
    error = "turn_error: boom\n## Attempt failed 1 (an echo of an earlier one)\nold"
    res = {"text": None, "turn_status": "errored", "error": error}
    Worker(q, "builder", log=log).build(Fake(res), "a", "w")
    t = q.read("todo", "a")
    section = t.body[t.body.index("## Attempt failed 1") :]
    assert "boom" in section and t.attempts == 1
    assert t.sections("Attempt failed") == 1  # a heading inside the error stays text
    assert "attempt failed (the agent's turn ended errored: turn_error: boom" in log.getvalue()


def test_no_verdict_goes_back_to_review_and_is_not_an_attempt(q):
    q.add("t", "x", task_id="a")
    q.claim("builder", "b")
    q.moves.finish_build("a", "b", "r", "claude")
    q.claim("verifier", "v")
    log = io.StringIO()
    res = {"text": "I looked around and it seems fine.", "turn_status": "completed"}
    Worker(q, "verifier", providers=["codex"], log=log).verify(Fake(res), "a", "v")
    t = q.read("review", "a")
    assert t.attempts == 0 and t.sections("Reject") == 0
    assert t.sections("Verification returned") == 1 and "no VERDICT line" in t.body
    assert "no VERDICT line" in log.getvalue() and "-> review/" in log.getvalue()
    assert "Verification returned" not in t.text  # the next verifier does not see it


# -- item 6: the verifier is not pointed at the queue ----------------------------------------


def test_a_verifier_never_runs_inside_the_queue(q, monkeypatch):
    q.add("t", "x", task_id="a")
    monkeypatch.chdir(q.root / "results")
    with pytest.raises(QueueError, match="inside the queue"):
        Worker(q, "verifier", drain=True, sdk_factory=lambda: Fake({})).run()
    r = cli("work", str(q.root), "--role", "verifier", "--cwd", str(q.root), "--drain")
    assert r.returncode != 0 and "inside the queue" in r.stderr, r.stderr


# -- items 7, 11, 12: defaults, agent paths, usage lines ----------------------------------------


def test_work_has_a_default_agent_time_limit():
    r = cli("work", "--help")
    assert "--timeout" in r.stdout and "default: 60m" in r.stdout, r.stdout


def test_queue_segments_never_collide_and_keep_the_readable_part(short_tmp):
    from orcr_tasks.location import agent_segment

    from orcr_core.paths import SEGMENT

    a = Queue.init(short_tmp / "a" / "ünï cødé")
    b = Queue.init(short_tmp / "b" / "ünï cødé")
    c = Queue.init(short_tmp / "a" / "n  c d")
    names = {a.name, b.name, c.name}
    assert len(names) == 3 and all(SEGMENT.fullmatch(n) and len(n) <= 64 for n in names)
    assert a.name.startswith("n_c_d_") and Queue(a.root).name == a.name  # stable
    assert agent_segment("t12") == "t12"
    assert len({agent_segment("T1"), agent_segment("t1"), agent_segment("t.1")}) == 3
    assert SEGMENT.fullmatch(agent_segment("x" * 64 + ".y"))


@pytest.mark.parametrize("verb", ["ls", "status", "reap", "unlock", "work"])
def test_usage_lines_show_dir_as_optional(verb):
    r = cli(verb, "--help")
    usage = r.stdout.splitlines()[0]
    assert "[DIR]" in usage, usage


def test_rename_noreplace_refuses_an_empty_directory_through_the_kernel(tmp_path):
    """A claim's rename never replaces an empty directory: the kernel refuses it
    (``renameat2(RENAME_NOREPLACE)`` from the process's own C library, looked up at
    the first rename, not at import: ``find_library`` ran ``ldconfig`` in every
    server). Planted: ``_libc`` finding no C library -> ``_native`` answers None
    (only the check-then-rename fallback is left) -> fails."""
    import errno

    from orcr_tasks import files

    src, dst = tmp_path / "claim", tmp_path / "taken"
    src.mkdir()
    dst.mkdir()
    if sys.platform.startswith("linux"):
        assert files._native(os.fsencode(src), os.fsencode(dst)) in (errno.EEXIST, errno.ENOTEMPTY)
    with pytest.raises(FileExistsError):
        files.rename_noreplace(src, dst)
    assert src.is_dir() and dst.is_dir()
