"""``agent run --worktree``: every writing agent in a checkout of its own (issue 22).

Real git, real tmux, the echo agent. The backend tests run over every kind this
machine has (jj only where a ``jj`` binary is on PATH: none is packaged here).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from orcr_core.kit.testing import until

KINDS = [
    "git",
    pytest.param("jj", marks=pytest.mark.skipif(not shutil.which("jj"), reason="no jj")),
]


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def make_repo(root: Path, kind: str = "git") -> Path:
    repo = root / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "sub" / "a.txt").write_text("a\n")
    if kind == "jj":
        subprocess.run(["jj", "git", "init", "--colocate"], cwd=repo, check=True)
        subprocess.run(["jj", "commit", "-m", "first"], cwd=repo, check=True)
        subprocess.run(["jj", "bookmark", "create", "main", "-r", "@-"], cwd=repo, check=True)
        return repo
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo


@pytest.fixture
def tmux(orcr_home, short_tmp):
    """orcr on a real tmux, with checkouts under the test's own folder."""
    from conftest import Mux

    mux = Mux("tmux", short_tmp)
    orcr_home.mux = mux
    orcr_home.wt_dir = short_tmp / "checkouts"
    orcr_home.config(
        mux.config()
        + '[timings]\npoll_every = "50ms"\n'
        + f'[worktrees]\ndir = "{orcr_home.wt_dir}"\n'
    )
    yield orcr_home
    orcr_home.stop_server()
    orcr_home.kill_server()
    mux.close()
    orcr_home.reap()


def run_wt(home, cwd, path, *extra, check=True):
    return home.run(
        "agent", "run", "-p", "echo", "--path", path, "--cwd", str(cwd), "--worktree",
        *extra, "hello", check=check,
    )  # fmt: skip


def idle(home, path):
    try:
        return until(lambda: (lambda a: a if a["status"] == "idle" else None)(home.get(path)), 30)
    except AssertionError:
        raise AssertionError(f"{path} not idle: {home.get(path)} {home.server_log()}") from None


def settled(home, path, states=("kept", "removed")):
    return until(
        lambda: (lambda a: a if (a["worktree"] or {}).get("state") in states else None)(
            home.get(path)
        ),
        30,
        what=f"{path}'s checkout to be kept or removed",
    )


def kinds(home, uuid):
    return [e["kind"] for e in home.events(uuid) if e["kind"].startswith("worktree.")]


def test_an_agent_works_in_its_own_checkout_on_its_own_branch(tmux, short_tmp):
    repo = make_repo(short_tmp)
    tmux.start_server()
    out = run_wt(tmux, repo / "sub", "wt/one").stdout.split()
    a = idle(tmux, "wt/one")
    wt = a["worktree"]
    assert (wt["kind"], wt["state"], wt["branch"]) == ("git", "created", "orcr/wt/one")
    assert wt["base_commit"] == git(repo, "rev-parse", "HEAD")
    assert Path(wt["path"]).parent.parent == tmux.wt_dir  # worktrees.dir
    assert a["cwd"] == str(Path(wt["path"]) / "sub")  # the same directory inside it
    assert git(wt["path"], "branch", "--show-current") == "orcr/wt/one"
    assert (Path(wt["path"]) / "sub" / "a.txt").read_text() == "a\n"
    # the echo agent runs there: its process's cwd is the checkout's sub/
    pid = int(a["pane_process"].split("@")[0]) if a.get("pane_process") else None
    launch = json.loads((tmux.path / "agents" / out[1] / "launch.json").read_text())
    assert launch["worktree"]["path"] == wt["path"] and launch["cwd"] == a["cwd"]
    assert kinds(tmux, out[1]) == ["worktree.requested", "worktree.created"]
    del pid
    # the repository's own checkout is untouched: nothing untracked, same branch
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "branch", "--show-current") == "main"


def test_refusals_name_what_is_wrong(tmux, short_tmp):
    repo = make_repo(short_tmp)
    plain = short_tmp / "plain"
    plain.mkdir()
    git(repo, "branch", "taken")
    tmux.start_server()
    r = run_wt(tmux, plain, "x/a", check=False)
    assert r.returncode != 0 and "not inside a git or jj repository" in r.stderr
    r = run_wt(tmux, repo, "x/b", "--branch", "taken", check=False)
    assert r.returncode != 0 and "already exists" in r.stderr
    r = run_wt(tmux, repo, "x/c", "--branch", "bad..name", check=False)
    assert r.returncode != 0 and "not a valid branch name" in r.stderr
    r = tmux.run("agent", "run", "-p", "echo", "--cwd", str(repo), "--branch", "b", "hi")
    assert r.returncode != 0 and "need --worktree" in r.stderr
    r = run_wt(tmux, repo, "x/d", "--base", "nosuchrev")
    a = tmux.ended("x/d")
    assert a["exit_reason"] == "failed" and "nosuchrev" in a["error"], a
    assert git(repo, "worktree", "list").count("\n") == 0  # only the main checkout
    assert tmux.run("agent", "ls").stdout.count("x/") == 0


def test_sync_folder_refused(orcr_home, short_tmp):
    repo = make_repo(short_tmp)
    orcr_home.config(
        '[driver]\nname = "test"\n[worktrees]\ndir = "' + str(short_tmp / "Dropbox" / "wt") + '"\n'
    )
    orcr_home.start_server()
    r = run_wt(orcr_home, repo, "s/a", check=False)
    assert r.returncode != 0 and "synced by Dropbox" in r.stderr
    orcr_home.run("config", "set", "worktrees.dir", str(repo / "wt"), check=True)
    r = run_wt(orcr_home, repo, "s/b", check=False)
    assert r.returncode != 0 and "inside the repository" in r.stderr, r.stderr


def _kill_and_settle(home, path):
    home.run("agent", "kill", path, check=True)
    return settled(home, path)["worktree"]


def test_on_end_a_clean_checkout_goes_and_no_commit_is_ever_lost(tmux, short_tmp):
    repo = make_repo(short_tmp)
    tmux.start_server()
    for p in ("end/clean", "end/dirty", "end/untracked", "end/commit", "end/merged"):
        run_wt(tmux, repo, p)
    ws = {p: idle(tmux, p)["worktree"]["path"] for p in ("end/dirty", "end/untracked")}
    ws |= {p: idle(tmux, p)["worktree"]["path"] for p in ("end/commit", "end/merged")}
    idle(tmux, "end/clean")
    (Path(ws["end/dirty"]) / "sub" / "a.txt").write_text("changed\n")
    (Path(ws["end/untracked"]) / "new.txt").write_text("new\n")
    for p in ("end/commit", "end/merged"):
        (Path(ws[p]) / "f.txt").write_text(p)
        git(ws[p], "add", "f.txt")
        git(ws[p], "-c", "user.email=t@x", "-c", "user.name=t", "commit", "-q", "-m", p)
    git(repo, "merge", "-q", "--ff-only", "orcr/end/merged")
    merged_commit = git(repo, "rev-parse", "HEAD")
    only_commit = git(ws["end/commit"], "rev-parse", "HEAD")

    clean = _kill_and_settle(tmux, "end/clean")
    assert clean["state"] == "removed" and not Path(clean["path"]).exists()
    assert (
        git(repo, "branch", "--format=%(refname:short)", "--list", "orcr/end/clean") == ""
    )  # its empty branch went too
    for p, why in (
        ("end/dirty", "1 changed or untracked file"),
        ("end/untracked", "1 changed or untracked file"),
        ("end/commit", "1 commit on orcr/end/commit not on any other branch"),
    ):
        wt = _kill_and_settle(tmux, p)
        assert (wt["state"], wt["reason"]) == ("kept", why), (p, wt)
        assert Path(wt["path"]).is_dir()
    merged = _kill_and_settle(tmux, "end/merged")
    assert merged["state"] == "removed", merged  # everything it made is on main
    assert git(repo, "rev-parse", "HEAD") == merged_commit
    assert (Path(ws["end/dirty"]) / "sub" / "a.txt").read_text() == "changed\n"

    # `orcr worktree ls` lists what is kept and what each holds
    rows = json.loads(tmux.run("worktree", "ls", "--json", check=True).stdout)
    assert sorted(r["agent"] for r in rows) == ["end/commit", "end/dirty", "end/untracked"]
    assert "orcr/end/commit" in tmux.run("worktree", "ls", check=True).stdout
    # removal on request: refused while it holds work; --force drops files, never a commit
    r = tmux.run("worktree", "rm", "end/commit")
    assert r.returncode != 0 and "holds 1 commit" in r.stderr
    tmux.run("worktree", "rm", "end/commit", "--force", check=True)
    assert not Path(ws["end/commit"]).exists()
    assert git(repo, "rev-parse", "orcr/end/commit") == only_commit  # the branch kept it
    tmux.run("worktree", "rm", ws["end/untracked"], "--force", check=True)  # by its checkout
    assert (
        git(repo, "branch", "--format=%(refname:short)", "--list", "orcr/end/untracked") == ""
    )  # it held no commit
    r = tmux.run("worktree", "rm", str(short_tmp))
    assert r.returncode != 0 and "no agent or orcr-made checkout" in r.stderr
    live_ = run_wt(tmux, repo, "end/live").stdout.split()[1]
    r = tmux.run("worktree", "rm", live_)
    assert r.returncode != 0 and "only once it ended" in r.stderr


def test_ten_agents_at_once_get_ten_checkouts(tmux, short_tmp):
    repo = make_repo(short_tmp)
    tmux.start_server()
    with tmux.sdk() as orcr:
        res = orcr.run_many(
            [
                {"prompt": "hi", "provider": "echo", "path": f"ten/a{i}", "cwd": str(repo),
                 "worktree": True}
                for i in range(10)
            ]
        )  # fmt: skip
    assert all("error" not in r for r in res), res
    rows = [idle(tmux, f"ten/a{i}") for i in range(10)]
    assert len({r["worktree"]["path"] for r in rows}) == 10
    assert all(r["worktree"]["state"] == "created" for r in rows)
    branches = git(repo, "branch", "--format=%(refname:short)", "--list", "orcr/ten/*").split()
    assert len(branches) == 10
    assert git(repo, "worktree", "list").count("\n") == 10  # main + 10


#: (fault point, what the agent's checkout becomes): a crash before the pane is
#: recorded fails the start (seed 002); its checkout, made or half-made, is removed
POINTS = ["worktree_requested", "worktree_made"]


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_while_making_the_checkout(tmux, short_tmp, point):
    repo = make_repo(short_tmp)
    tmux.start_server(extra_env={"ORCR_FAULT": point})
    run_wt(tmux, repo, "crash/a", check=False)
    assert tmux.proc.wait(30) == -signal.SIGKILL, tmux.server_log()
    tmux.start_server()
    a = settled(tmux, "crash/a", ("removed",))
    assert (a["status"], a["exit_reason"]) == ("ended", "failed"), a
    assert not Path(a["worktree"]["path"]).exists()
    assert git(repo, "worktree", "list").count("\n") == 0
    assert git(repo, "branch", "--format=%(refname:short)", "--list", "orcr/*") == ""
    assert kinds(tmux, a["uuid"]) == ["worktree.requested", "worktree.removed"]
    # the path is free again and a new run gets a checkout
    run_wt(tmux, repo, "crash/a")
    assert idle(tmux, "crash/a")["worktree"]["state"] == "created"


@pytest.mark.parametrize("point", ["worktree_removing", "worktree_discarding"])
def test_sigkill_while_removing_the_checkout(tmux, short_tmp, point):
    repo = make_repo(short_tmp)
    tmux.start_server(extra_env={"ORCR_FAULT": point})
    if point == "worktree_removing":
        run_wt(tmux, repo, "rmcrash/a")
        idle(tmux, "rmcrash/a")
    else:  # canceled while queued... a start that ends before its checkout is made
        tmux.run("agent", "run", "-p", "echo", "--path", "rmcrash/a", "--cwd", str(repo),
                 "--worktree", "--base", "nosuchrev", "hi", check=True)  # fmt: skip
    tmux.run("agent", "kill", "rmcrash/a")
    assert tmux.proc.wait(30) == -signal.SIGKILL, tmux.server_log()
    tmux.start_server()
    a = settled(tmux, "rmcrash/a", ("removed",))
    assert not Path(a["worktree"]["path"]).exists()
    assert git(repo, "worktree", "list").count("\n") == 0
    assert git(repo, "branch", "--format=%(refname:short)", "--list", "orcr/*") == ""
    assert kinds(tmux, a["uuid"]).count("worktree.removed") == 1


@pytest.mark.parametrize("kind", KINDS)
def test_backend_keeps_what_holds_work(short_tmp, kind, monkeypatch):
    """The one interface over git and jj: make, inspect, remove."""
    from orcr_core.workspaces import vcs

    monkeypatch.setenv("ORCR_HOME", str(short_tmp / "home"))
    repo = make_repo(short_tmp, kind)
    found = vcs.find(str(repo / "sub"))
    assert found == (kind, str(repo.resolve()))
    b = vcs.BACKENDS[kind]
    base = b.resolve(str(repo), b.default_base)
    dest = str(short_tmp / "co" / "one")
    assert b.check_branch(str(repo), "one") is None
    b.create(str(repo), dest, "one", base)
    assert b.registered(str(repo), dest)
    assert b.holdings(str(repo), dest, "one").reason("one") is None
    Path(dest, "x.txt").write_text("x")
    assert "1 changed or untracked file" in b.holdings(str(repo), dest, "one").reason("one")
    os.remove(Path(dest, "x.txt"))
    b.remove(str(repo), dest, "one", b.branch_tip(str(repo), "one"))
    assert not Path(dest).exists()


def test_model_and_args_per_run_are_stored_shown_and_used_by_resume(tmux, short_tmp):
    """--model/--arg reach the CLI's argv (after the config's extra_args), show in
    agent get, and a resumed agent gets them again, in its checkout made again."""
    from fake_clis import FAKES

    repo = make_repo(short_tmp)
    tmux.config(
        tmux.mux.config()
        + '[timings]\npoll_every = "50ms"\nprompt_confirm = "1s"\n'
        + f'[worktrees]\ndir = "{tmux.wt_dir}"\n'
        + f'[providers.claude]\nhome = "{short_tmp / "claude"}"\n'
        + f"argv = {json.dumps([str(FAKES / 'claude')])}\n"
        + 'model = "sonnet"\nextra_args = ["--fake-from-config"]\n'
    )
    tmux.start_server()
    tmux.run(
        "agent", "run", "-p", "claude", "--path", "m/one", "--cwd", str(repo), "--worktree",
        "--model", "opus", "--arg=--fake-from-run", "first", check=True,
    )  # fmt: skip
    tmux.run("agent", "wait", "m/one", "--timeout", "30s", check=True)
    a = tmux.get("m/one")
    assert (a["model"], a["args"]) == ("opus", ["--fake-from-run"])
    argv = [
        e["data"]["argv"] for e in tmux.events(a["uuid"]) if e["kind"] == "pane.start_requested"
    ]
    tail = argv[0][argv[0].index("--model") :]
    assert tail == ["--model", "opus", "--fake-from-config", "--fake-from-run"], argv
    # lost: its clean checkout is removed; resumed: made again, same options
    subprocess.run(["tmux", "-S", str(tmux.mux.socket), "kill-server"], check=True)
    settled(tmux, "m/one", ("removed",))
    tmux.run("agent", "resume", "m/one", check=True)
    b = idle(tmux, "m/one")
    assert b["worktree"]["state"] == "created" and Path(b["cwd"]).is_dir()
    assert b["worktree"]["branch"] == "orcr/m/one"
    argv = [
        e["data"]["argv"] for e in tmux.events(a["uuid"]) if e["kind"] == "pane.start_requested"
    ]
    assert len(argv) == 2 and "--resume" in argv[1]
    assert argv[1][argv[1].index("--model") :][:2] == ["--model", "opus"]
    assert argv[1][-2:] == ["--fake-from-config", "--fake-from-run"]


def test_model_and_args_refused_where_not_taken(orcr_home):
    orcr_home.start_server()
    r = orcr_home.run("agent", "run", "-p", "echo", "--model", "opus", "hi")
    assert r.returncode != 0 and "--model is not taken by the echo provider" in r.stderr
    # the list comes from the adapters, not a hand-kept "claude and codex" (planted: the
    # old fixed text -> fails)
    assert "installed providers that take it: claude, codex, gemini, opencode" in r.stderr
    r = orcr_home.run("agent", "run", "-p", "command", "--arg", "x", "--", "sleep", "9")
    assert r.returncode != 0 and "give the whole argv after --" in r.stderr, r.stderr
    assert orcr_home.run("agent", "ls", "--json").stdout.strip() == "[]"


def test_claude_in_a_fresh_checkout_sees_no_trust_dialog(tmux, short_tmp):
    """trust_cwd = true: the checkout is recorded as trusted in Claude Code's config
    before it starts (the user's other keys kept), so the fake Claude Code (which asks
    about every folder it does not trust) asks nothing and the prompt is typed once."""
    from fake_clis import FAKES

    repo = make_repo(short_tmp)
    home = short_tmp / "claude"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"theme": "dark", "projects": {"/x": {}}}))
    tmux.config(
        tmux.mux.config()
        + '[timings]\npoll_every = "50ms"\nprompt_confirm = "1s"\n'
        + f'[worktrees]\ndir = "{tmux.wt_dir}"\n'
        + f'[providers.claude]\nhome = "{home}"\ntrust_cwd = true\n'
        + f"argv = {json.dumps([str(FAKES / 'claude'), '--fake-dialogs', 'trust'])}\n"
    )
    tmux.start_server()
    uuid = tmux.run(
        "agent", "run", "-p", "claude", "--path", "t/one", "--cwd", str(repo / "sub"),
        "--worktree", "hello", check=True,
    ).stdout.split()[1]  # fmt: skip
    tmux.run("agent", "wait", "t/one", "--timeout", "30s", check=True)
    a = tmux.get("t/one")
    kinds_ = [e["kind"] for e in tmux.events(uuid)]
    assert "agent.dialog_answered" not in kinds_ and "agent.blocked" not in kinds_, kinds_
    assert kinds_.count("worktree.trusted") == 1 and kinds_.count("prompt.requested") == 1
    saved = json.loads((home / ".claude.json").read_text())
    assert saved["theme"] == "dark" and "/x" in saved["projects"]
    assert saved["projects"][a["cwd"]]["hasTrustDialogAccepted"] is True
    assert tmux.run("agent", "read", "t/one", check=True).stdout.strip()


def test_claude_trust_file_that_is_not_json_is_left_alone(short_tmp):
    from orcr_claude import trust

    path = short_tmp / ".claude.json"
    path.write_text("{not json")
    with pytest.raises(OSError, match="not JSON"):
        trust.trust(path, "/some/where")
    assert path.read_text() == "{not json"
    assert not (short_tmp / ".claude.json.lock").exists()
    path.write_text("{}")
    assert trust.trust(path, "/w") is True and trust.trust(path, "/w") is False


def test_top_flags_an_agent_in_its_own_checkout():
    from orcr_core.top.model import FleetModel, Row, flag

    assert flag(None, False, False, "created") == "wt"
    assert flag(None, False, False, "removed") == ""
    assert flag("trust?", False, False, "created") == "blocked"  # blocked wins
    row = Row.from_agent(
        {"uuid": "u", "path": "a/b", "status": "idle", "worktree": {"state": "created"}}
    )
    assert row.flag == "wt" and row.to_json(0)["worktree"] == "created"
    m = FleetModel()
    m.load_snapshot(
        {"snapshot_seq": 1, "agents": [{"uuid": "u", "path": "a/b", "status": "ended"}]}
    )
    m.apply_batch([{"seq": 2, "ts": 0, "kind": "worktree.kept", "agent": "u", "data": {}}])
    assert m.rows["u"].flag == "wt"


def test_resume_runs_in_the_kept_checkout_again(tmux, short_tmp):
    repo = make_repo(short_tmp)
    tmux.start_server()
    run_wt(tmux, repo / "sub", "rs/one")
    wt = idle(tmux, "rs/one")["worktree"]
    (Path(wt["path"]) / "notes.txt").write_text("unfinished\n")
    subprocess.run(["tmux", "-S", str(tmux.mux.socket), "kill-server"], check=True)
    kept = settled(tmux, "rs/one")["worktree"]
    assert (kept["state"], kept["reason"]) == ("kept", "1 changed or untracked file")
    tmux.run("agent", "resume", "rs/one", check=True)
    a = idle(tmux, "rs/one")
    assert a["worktree"]["state"] == "created" and a["worktree"]["path"] == wt["path"]
    assert a["cwd"] == str(Path(wt["path"]) / "sub")
    assert (Path(wt["path"]) / "notes.txt").read_text() == "unfinished\n"
    assert kinds(tmux, a["uuid"]).count("worktree.created") == 1  # not made again


def test_a_kill_while_the_checkout_is_made_cancels_and_leaves_nothing(tmux, short_tmp):
    """cancel_requested is checked after git returns: the start ends canceled, no
    pane is started, and the checkout just made is removed with its branch."""
    repo = make_repo(short_tmp)
    hook = repo / ".git" / "hooks" / "post-checkout"  # git worktree add runs it
    hook.write_text(f"#!/bin/sh\ntouch {short_tmp}/hook-ran\nsleep 3\n")
    hook.chmod(0o755)
    tmux.start_server()
    uuid = run_wt(tmux, repo, "cx/one").stdout.split()[1]
    until(lambda: (short_tmp / "hook-ran").exists(), 30, what="git worktree add under way")
    assert tmux.run("agent", "kill", "cx/one", check=True).stdout.split()[-1] == "cancel_requested"
    a = settled(tmux, "cx/one", ("removed",))
    assert (a["status"], a["exit_reason"]) == ("ended", "canceled"), a
    assert not Path(a["worktree"]["path"]).exists()
    assert git(repo, "worktree", "list").count("\n") == 0
    assert git(repo, "branch", "--format=%(refname:short)", "--list", "orcr/*") == ""
    ks = [e["kind"] for e in tmux.events(uuid)]
    assert "pane.start_requested" not in ks and "worktree.created" not in ks, ks
