"""Dependants start from their dependencies' work (issue 40 item 2).

A dependant's builder checkout starts from its dependencies' verified revisions
merged onto the queue's base (``dependants = merged``, the default), or the
dependant leaves backlog/ only once every dependency's revision is on the base
branch (``dependants = landed``). Revisions that do not merge refuse the task to
inbox/ with a ``## Refused`` section, not an attempt. Real git repositories.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from orcr_tasks import checkouts
from orcr_tasks.backend import QueueError
from orcr_tasks.queue import Queue
from orcr_tasks.status import compute, render

ID = ["-c", "user.email=t@x", "-c", "user.name=t"]


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def make_repo(root):
    repo = root / "repo"
    git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "test_base.py").write_text(
        "import unittest\n\n\nclass Base(unittest.TestCase):\n    def test(self):\n        pass\n"
    )
    git(repo, "add", ".")
    git(repo, *ID, "commit", "-q", "-m", "first")
    return repo


def commit_on(repo, branch, name, text, start="main") -> str:
    """A commit on a new ``branch`` from ``start`` writing ``name``; main stays checked out."""
    git(repo, "branch", branch, start)
    git(repo, "checkout", "-q", branch)
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, *ID, "commit", "-q", "-m", f"{branch}: {name}")
    made = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return made


def test_start_commit_merges_the_dependencies_onto_the_base_or_says_why_not(short_tmp):
    """Planted: start_commit returning the base alone -> the merged tree lacks dep.py and
    fails; the conflict not detected (merge-tree's exit ignored) -> no why, fails."""
    repo = make_repo(short_tmp)
    main = git(repo, "rev-parse", "main")
    a = commit_on(repo, "a", "dep.py", "VALUE = 42\n")
    b = commit_on(repo, "b", "other.py", "OTHER = 1\n")
    # one dependency that contains the base: its revision as it is
    assert checkouts.start_commit(str(repo), None, [("A", a)], "T") == (a, None)
    # two: a merge commit holding both, on top of the base
    start, why = checkouts.start_commit(str(repo), "main", [("A", a), ("B", b)], "T")
    assert why is None and start not in (a, b, main)
    files = git(repo, "ls-tree", "--name-only", start).split()
    assert {"dep.py", "other.py", "test_base.py"} <= set(files), files
    for rev in (a, b, main):
        git(repo, "merge-base", "--is-ancestor", rev, start)
    # a revision already in the base adds nothing; a dependency with none is skipped
    assert checkouts.start_commit(str(repo), "main", [("M", main), ("N", None)], "T") == (
        main,
        None,
    )
    # revisions that do not merge: refused, naming the file
    c1 = commit_on(repo, "c1", "same.txt", "one\n")
    c2 = commit_on(repo, "c2", "same.txt", "two\n")
    start, why = checkouts.start_commit(str(repo), None, [("C1", c1), ("C2", c2)], "T")
    assert start is None and "do not merge" in why and "same.txt" in why and "C2" in why, why
    start, why = checkouts.start_commit(str(repo), None, [("X", "feedbeef")], "T")
    assert start is None and "X's revision feedbeef is not a commit" in why
    assert "not a commit" in checkouts.start_commit(str(repo), "nosuch", [], "T")[1]


def _finish(q, tid: str, revision: str) -> None:
    """Build and pass ``tid`` by hand with ``revision`` (no agents)."""
    assert q.claim("builder", "b", {}, lambda *a: None) == tid
    q.moves.finish_build(tid, "b", revision, "claude", results="r\n")
    assert q.claim("verifier", "v", {}, lambda *a: None) == tid
    assert q.moves.verdict(tid, "v", True, "codex", "VERDICT: pass") == "done"


def test_landed_releases_a_dependant_only_once_its_dependency_is_on_the_base(q, short_tmp):
    """Both backends: with dependants = landed a done dependency whose revision is on a
    side branch keeps its dependant in backlog/ (on release and on add) until the
    revision is merged into the base branch; the default releases at once.
    Planted: _landed returning True -> T2 leaves backlog/ before the merge, fails."""
    repo = make_repo(short_tmp)
    rev = commit_on(repo, "work", "dep.py", "VALUE = 42\n")
    assert q.settings() == {
        "dependants": "merged",
        "base": None,
        "keep_checkouts": False,
        "land_check": None,
    }
    assert q.set_settings({"dependants": "landed", "base": "main"})["dependants"] == "landed"
    assert q.settings()["base"] == "main"
    q.moves.repo = str(repo)
    q.add("the dependency", done_when="tests pass", task_id="T1")
    q.add("the dependant", done_when="tests pass", task_id="T2", depends_on=["T1"])
    _finish(q, "T1", rev)
    assert q.where("T2") == ["backlog"]
    assert q.add("added late", done_when="x", task_id="T3", depends_on=["T1"])[1] == "backlog"
    waiting = compute(q, 600)["landing"]
    assert [(w["id"], w["base"]) for w in waiting] == [("T2", "main"), ("T3", "main")]
    assert "LANDING backlog/T2: waits for T1 (done) to land on main" in render(compute(q, 600))
    q.moves.repo = None  # a caller with no repository (tasks reap elsewhere) releases nothing
    git(repo, *ID, "merge", "-q", "--no-ff", "-m", "land T1", "work")
    assert q.moves.release() == [] and q.where("T2") == ["backlog"]
    q.moves.repo = str(repo)
    assert sorted(q.moves.release()) == ["T2", "T3"]
    assert q.where("T2") == ["todo"]
    assert compute(q, 600)["landing"] == []
    # the default mode: released as soon as the dependency is done
    q.set_settings({"dependants": "merged"})
    q.add("the next one", done_when="x", task_id="T4", depends_on=["T1"])
    assert q.where("T4") == ["todo"]


def test_settings_cli_refuses_what_is_not_allowed(orcr_home, short_tmp):
    """Settings are checked by name and value; the file queue's settings.json is read whole."""
    q = Queue.init(short_tmp / "q")
    d = str(q.root)
    ok = orcr_home.run("tasks", "settings", d, "dependants=landed", "keep_checkouts=yes", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {
        "dependants": "landed",
        "base": None,
        "keep_checkouts": True,
        "land_check": None,
    }
    for bad, says in (
        ("dependants=later", "give one of merged, landed"),
        ("colour=red", "no queue setting 'colour'"),
        ("keep_checkouts=maybe", "give true or false"),
        ("base=-x", "not a branch or revision"),
        ("dependants", "is not NAME=VALUE"),
    ):
        r = orcr_home.run("tasks", "settings", d, bad)
        assert r.returncode != 0 and says in r.stderr, (bad, r.stderr)
    assert q.settings()["dependants"] == "landed"
    (q.root / "settings.json").write_text("[1]")
    with pytest.raises(QueueError, match="not a JSON object"):
        q.settings()


def test_tasks_reap_run_in_the_repository_releases_landed_dependants(orcr_home, short_tmp):
    """``tasks reap`` checks landing in the repository it runs in; elsewhere it releases
    no dependant of this mode. Planted: reap not given the repository -> T2 stays, fails."""
    repo = make_repo(short_tmp)
    rev = commit_on(repo, "work", "dep.py", "VALUE = 42\n")
    q = Queue.init(short_tmp / "q")
    q.set_settings({"dependants": "landed"})
    q.add("the dependency", done_when="tests pass", task_id="T1")
    q.add("the dependant", done_when="tests pass", task_id="T2", depends_on=["T1"])
    _finish(q, "T1", rev)
    git(repo, *ID, "merge", "-q", "--no-ff", "-m", "land T1", "work")

    def reap(cwd):
        cmd = [sys.executable, "-m", "orcr_core.cli", "tasks", "reap", str(q.root)]
        res = subprocess.run(cmd, cwd=cwd, env=orcr_home.env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr

    reap(short_tmp)  # not a repository: nothing to check landing against
    assert q.where("T2") == ["backlog"]
    reap(repo)
    assert q.where("T2") == ["todo"]


AGENT = """#!{python}
# A faithful stand-in for a model with a shell tool: what it does depends on the
# branch of the checkout it runs in (the task id and step are in its name).
import subprocess, sys
import orcr_providers.echo_agent as echo

def sh(*argv):
    return subprocess.run(argv, capture_output=True, text=True)

def commit(name, text):
    open(name, "w").write(text)
    sh("git", "add", name)
    sh("git", "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qm", name)

branch = sh("git", "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
verdict = None
if "/v-" in branch:  # a verifier: run the unit tests in this checkout
    res = sh(sys.executable, "-m", "unittest", "discover", "-q")
    verdict = "pass" if res.returncode == 0 else (
        "reject the unit tests fail: " + " ".join(res.stderr.split()[-12:]))
elif "/dep/" in branch:
    commit("dep.py", "VALUE = 42\\n")
elif "/use/" in branch:
    commit("test_use.py", "import unittest\\n\\nimport dep\\n\\n\\n"
           "class Use(unittest.TestCase):\\n    def test(self):\\n"
           "        self.assertEqual(dep.VALUE, 42)\\n")
elif "/c1/" in branch:
    commit("same.txt", "one\\n")
elif "/c2/" in branch:
    commit("same.txt", "two\\n")
if verdict:
    plain = echo.parse_prompt

    def parse(text):
        plan = plain(text)
        plan.text += "\\nVERDICT: " + verdict
        return plan

    echo.parse_prompt = parse
sys.exit(echo.main(sys.argv[1:]))
"""

FAST = ["--provider", "echo", "--heartbeat", "0.2s", "--drain", "--worktree"]


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_dependant_is_built_on_its_dependencys_work_and_a_conflict_is_refused(live, short_tmp):
    """``use``'s unit test imports the module ``dep`` added (on dep's branch, merged
    nowhere): its builder's checkout starts from dep's revision, so the verifier's
    unit tests pass in a checkout of use's revision. c3 depends on c1 and c2, which
    change one file two ways: refused to inbox/ with the reason, no attempt used.
    Planted: the build's base left at HEAD (start_options not called) -> use's
    verifier runs test_use.py without dep.py, rejects, fails; the conflict not
    refused -> c3 is built, fails."""
    repo = make_repo(short_tmp)
    head = git(repo, "rev-parse", "HEAD")
    agent = short_tmp / "agent"
    agent.write_text(AGENT.format(python=sys.executable))
    agent.chmod(0o755)
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n'
        + f'[worktrees]\ndir = "{short_tmp / "checkouts"}"\n'
        + f'[providers.echo]\nargv = ["{agent}"]\n'
    )
    live.start_server()
    q = Queue.init(short_tmp / "q")
    d = str(q.root)

    def add(tid, *deps):
        extra = [x for dep in deps for x in ("--depends-on", dep)]
        live.run("tasks", "add", d, "--id", tid, *extra, "--done-when",
                 "python -m unittest passes", "--", "Build it.\nREVISION: HEAD", check=True)  # fmt: skip

    def work(role):
        return live.run("tasks", "work", d, "--role", role, "--cwd", str(repo), *FAST,
                        check=True, timeout=180)  # fmt: skip

    for tid, deps in (("dep", ()), ("use", ("dep",)), ("c1", ()), ("c2", ()), ("c3", ("c1", "c2"))):
        add(tid, *deps)
    logs = [work("builder").stderr, work("verifier").stderr]
    assert q.where("dep") == ["done"] and q.where("c1") == ["done"], logs
    assert q.where("use") == ["todo"] and q.where("c3") == ["todo"], logs
    assert git(repo, "rev-parse", "main") == head  # nothing was merged into main
    logs += [work("builder").stderr, work("verifier").stderr]
    use = q.read("done", "use") if q.where("use") == ["done"] else None
    assert use is not None, (q.text(q.where("use")[0], "use"), logs)
    assert use.meta["passes"] == ["echo"] and use.attempts == 0
    dep_rev = q.read("done", "dep").meta["revision"]
    git(repo, "merge-base", "--is-ancestor", dep_rev, use.meta["revision"])
    # the conflict: refused to inbox/, with the reason, no attempt charged
    assert q.where("c3") == ["inbox"], logs
    c3 = q.read("inbox", "c3")
    assert c3.attempts == 0 and c3.sections("Refused") == 1, c3.body
    assert "do not merge" in c3.body and "same.txt" in c3.body, c3.body
    assert any("c3: refused" in log for log in logs), logs
