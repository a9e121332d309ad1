"""A resumed start is crash-safe and goes through the queue like any start
(issue 10 item 3): ``[recovery] resume_lost`` requeues a lost agent in the
transaction that would have ended it, and the server SIGKILLed at every fault
point of the resumed start (and after every commit of the requeue itself)
comes back with the agent neither doubled nor lost. The test driver's
``testr`` provider records a session and can resume it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402
from orcr_core.sdk.client import ServerError  # noqa: E402

BASE = (
    '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nprompt_confirm = "200ms"\n'
    'reconcile_every = "1s"\n'
)
RESUME_LOST = "[recovery]\nresume_lost = true\n"


def _panes_of(uuid_path: str) -> list[dict]:
    return [p for p in td.read_state()["panes"].values() if p["label"] == uuid_path]


def _requeues(home, uuid: str) -> list[dict]:
    return [
        e["data"]
        for e in home.events(uuid)
        if e["kind"] == "agent.status" and e["data"]["to"] == "queued" and e["data"].get("resume")
    ]


def _lost_and_resumed_behind_a_blocker(home, saved: Path) -> str:
    """``r/a`` (testr) was working, ``b/x`` waited behind the global cap of 1. The
    server stopped and ``r/a``'s pane vanished; on restart ``r/a`` is lost, ``b/x``
    takes the slot and ``r/a`` is resumed behind it. Saved twice: ``saved/lost``
    (pane gone, server down) and ``saved/queued`` (resumed, waiting)."""
    home.config(BASE + "[concurrency]\nmax = 1\n" + RESUME_LOST)
    home.start_server()
    with home.sdk() as o:
        a = o.run("x", provider="testr", path="r/a", cwd="/")
        until(lambda: o.get("r/a")["status"] == "working")
        o.run("y", provider="testp", path="b/x", cwd="/")
        assert o.get("b/x")["status"] == "queued"
        pane = o.get("r/a")["pane_id"]
    home.stop_server()
    td.remove_pane(pane)  # gone while the server was down (a reboot, a multiplexer restart)
    home.save(saved / "lost")
    home.start_server()
    with home.sdk() as o:
        until(lambda: o.get("b/x")["status"] == "working", 30, "b/x promoted")
        until(lambda: o.get("r/a")["status"] == "queued", 30, "r/a resumed, queued")
    home.stop_server()
    assert len(_requeues(home, a["uuid"])) == 1
    home.save(saved / "queued")
    return a["uuid"]


def _settle_and_check(home, uuid: str) -> None:
    """Restart without a fault and let the resume finish: one resumed agent, one pane."""
    home.start_server()
    with home.sdk() as o:
        if o.list("b/x"):
            try:
                o.kill("b/x")
            except ServerError:
                pass
        until(lambda: o.get("r/a")["status"] == "idle", 30, "r/a resumed, idle")
        agent = o.get("r/a")
    home.stop_server()
    assert agent["uuid"] == uuid  # the same row, never a new one
    assert len(_requeues(home, uuid)) == 1, _requeues(home, uuid)  # resumed once
    statuses = [e["data"] for e in home.events(uuid) if e["kind"] == "agent.status"]
    assert statuses and statuses[-1]["to"] == "idle", statuses  # the steps were recorded
    assert all(s["to"] != "ended" for s in statuses), statuses  # never lost on the way
    panes = _panes_of("r/a")
    assert len(panes) == 1, panes  # never doubled
    assert panes[0]["token"] == _row(home, uuid)["launch_token"]
    assert "--resume" in panes[0]["argv"]


def _row(home, uuid: str) -> dict:
    import sqlite3

    conn = sqlite3.connect(home.path / "store.db")
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM agent WHERE uuid = ?", (uuid,)).fetchone())
    finally:
        conn.close()


@pytest.mark.parametrize(
    "point",
    [
        "before_promote",
        "after_promote",
        "before_workspace",
        "before_start",
        "after_start",
        "after_pane_recorded",
    ],
)
def test_sigkill_at_each_point_of_a_resumed_start(orcr_home, short_tmp, point):
    saved = short_tmp / "saved"
    uuid = _lost_and_resumed_behind_a_blocker(orcr_home, saved)
    orcr_home.restore(saved / "queued")
    orcr_home.start_server(extra_env={"ORCR_FAULT": point}, wait=False)
    try:
        orcr_home.wait_socket()
        with orcr_home.sdk() as o:
            o.kill("b/x")  # the slot frees: r/a's resumed start begins
    except (RuntimeError, OSError, ServerError):
        pass  # before_promote fires as the queue worker first runs
    assert orcr_home.proc.wait(30) == -signal.SIGKILL, orcr_home.server_log()
    if point not in ("before_promote", "after_promote", "before_workspace", "before_start"):
        assert len(_panes_of("r/a")) == 1  # the crash came after the pane was made
    _settle_and_check(orcr_home, uuid)


def test_sigkill_after_every_commit_of_the_automatic_resume(orcr_home, short_tmp):
    """From the moment the server finds the agent gone to its resumed start: a crash
    after any commit, then a restart, resumes it exactly once."""
    saved = short_tmp / "saved"
    uuid = _lost_and_resumed_behind_a_blocker(orcr_home, saved)
    crashes = 0
    for n in range(1, 40):
        if not orcr_home.crashed_after_commit(
            n, saved / "lost", lambda o: o.get("r/a")["status"] == "queued", "r/a requeued"
        ):
            break
        crashes += 1
        assert len(_requeues(orcr_home, uuid)) <= 1, f"crash after commit {n}"
        _settle_and_check(orcr_home, uuid)
    else:
        raise AssertionError("the resume never ran to the end without a crash")
    assert crashes >= 3  # at least: the loss, the requeue, the blocker's start


def _lose(home, provider: str, path: str) -> dict:
    """Start an agent, take its pane away and wait until its path is free: its row."""
    home.start_server()
    with home.sdk() as o:
        a = o.run("x", provider=provider, path=path, cwd="/")
        until(lambda: o.get(path)["status"] == "working")
        td.remove_pane(o.get(path)["pane_id"])
        until(lambda: o.list(path) == [], 30, "ended")
    return home.get(a["uuid"])


def test_without_resume_lost_a_lost_agent_ends_lost(orcr_home):
    orcr_home.config(BASE)  # off by default
    a = _lose(orcr_home, "testr", "r/a")
    assert a["exit_reason"] == "lost"
    assert _requeues(orcr_home, a["uuid"]) == []


def test_resume_lost_ends_lost_what_cannot_be_resumed(orcr_home):
    """testp has no resume_argv: with resume_lost on it still ends lost, and says why."""
    orcr_home.config(BASE + RESUME_LOST)
    a = _lose(orcr_home, "testp", "p/a")
    assert a["exit_reason"] == "lost"
    assert "resume_unsupported" in orcr_home.server_log()


def _starts(home) -> list[str]:
    """Paths in the order they went to ``starting``."""
    return [
        e["data"]["path"]
        for e in home.events()
        if e["kind"] == "agent.status" and e["data"]["to"] == "starting"
    ]


@pytest.mark.parametrize(
    "caps",
    ["[concurrency]\nmax = 1\n", "[concurrency]\nmax = 10\ntestr = 1\n"],
    ids=["global", "per-provider"],
)
def test_a_resume_waits_behind_the_caps_in_fifo_order(orcr_home, caps):
    """r/a is lost and resumed while the only slot (the global cap, or testr's own)
    is taken: it joins the queue at its end like any start, behind r/d admitted
    before the resume and ahead of r/e admitted after it; each freed slot goes to
    the oldest."""
    orcr_home.config(BASE + caps + RESUME_LOST)
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        o.run("x", provider="testr", path="r/a", cwd="/")
        until(lambda: o.get("r/a")["status"] == "working")
        o.run("x", provider="testr", path="r/c", cwd="/")
        o.run("x", provider="testr", path="r/d", cwd="/")
        assert o.get("r/c")["status"] == o.get("r/d")["status"] == "queued"
        td.remove_pane(o.get("r/a")["pane_id"])  # lost: the slot frees, r/c takes it
        until(lambda: o.get("r/c")["status"] == "working", 30, "r/c promoted")
        until(lambda: o.get("r/a")["status"] == "queued", 30, "r/a resumed")
        o.run("x", provider="testr", path="r/e", cwd="/")
        assert [o.get(p)["status"] for p in ("r/a", "r/d", "r/e")] == ["queued"] * 3
        assert _starts(orcr_home) == ["r/a", "r/c"]  # the cap holds the resume back
        o.kill("r/c")
        until(lambda: o.get("r/d")["status"] == "working", 30, "r/d promoted")
        assert o.get("r/a")["status"] == o.get("r/e")["status"] == "queued"
        o.kill("r/d")
        until(lambda: o.get("r/a")["status"] == "idle", 30, "r/a resumed, idle")
        assert o.get("r/e")["status"] == "queued"
        o.kill("r/a")
        until(lambda: o.get("r/e")["status"] == "working", 30, "r/e promoted")
    assert _starts(orcr_home) == ["r/a", "r/c", "r/d", "r/a", "r/e"]


def test_a_resumed_start_whose_new_pane_vanished_is_lost_again_not_failed(orcr_home, short_tmp):
    """The server died with the resumed start's pane recorded, and that pane was
    gone by the restart: the agent ends lost (resumable), not failed. Lost again
    so soon after its resume, it is not resumed automatically again (no start
    loop); ``agent resume`` still brings it back, as the same row."""
    saved = short_tmp / "saved"
    uuid = _lost_and_resumed_behind_a_blocker(orcr_home, saved)
    orcr_home.restore(saved / "queued")
    orcr_home.start_server(extra_env={"ORCR_FAULT": "after_pane_recorded"})
    with orcr_home.sdk() as o:
        o.kill("b/x")
    assert orcr_home.proc.wait(30) == -signal.SIGKILL, orcr_home.server_log()
    assert len(_panes_of("r/a")) == 1
    td.remove_pane(_row(orcr_home, uuid)["pane_id"])  # gone while the server is down
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        until(lambda: o.list("r/a") == [], 30, "r/a ended")
    moves = [e["data"] for e in orcr_home.events(uuid) if e["kind"] == "agent.status"]
    ended = [m for m in moves if m["to"] == "ended"]
    assert [m["exit_reason"] for m in ended] == ["lost"], moves
    assert len(_requeues(orcr_home, uuid)) == 1
    assert "not resumed automatically again" in orcr_home.server_log()
    orcr_home.run("agent", "resume", "r/a", check=True)
    with orcr_home.sdk() as o:
        until(lambda: o.get("r/a")["status"] == "idle", 30, "r/a resumed by hand, idle")
    orcr_home.stop_server()
    assert len(_requeues(orcr_home, uuid)) == 2
    assert _row(orcr_home, uuid)["resumes"] == 2
    assert len(_panes_of("r/a")) == 1


def test_resume_lost_does_not_loop_on_an_agent_that_cannot_hold(orcr_home):
    """An automatically resumed agent lost again right after its start ends lost:
    no second automatic resume, so a resume that cannot hold starts no TUIs in a loop."""
    orcr_home.config(BASE + RESUME_LOST)
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        a = o.run("x", provider="testr", path="r/f", cwd="/")
        until(lambda: o.get("r/f")["status"] == "working")
        td.remove_pane(o.get("r/f")["pane_id"])
        until(lambda: len(_requeues(orcr_home, a["uuid"])) == 1, 30, "resumed once")
        until(lambda: o.get("r/f")["status"] == "idle", 30, "resumed, idle")
        td.remove_pane(o.get("r/f")["pane_id"])  # and gone again at once
        until(lambda: o.list("r/f") == [], 30, "r/f ended")
    assert len(_requeues(orcr_home, a["uuid"])) == 1
    assert orcr_home.get(a["uuid"])["exit_reason"] == "lost"
    assert "not resumed automatically again" in orcr_home.server_log()


def test_a_resume_is_a_new_attempt_with_a_new_launch_token(orcr_home):
    """Seed 002: the launch token is unique per attempt: a resumed agent starts with a
    fresh one in its row, and its new pane carries it, so a pane of its earlier life
    can never be taken for the new one."""
    orcr_home.config(BASE)
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        a = o.run("x", provider="testr", path="t/a", cwd="/")
        until(lambda: o.get("t/a")["status"] == "working")
        old = _row(orcr_home, a["uuid"])["launch_token"]
        td.remove_pane(o.get("t/a")["pane_id"])
        until(lambda: o.list("t/a") == [], 30, "t/a ended lost")
        orcr_home.run("agent", "resume", "t/a", check=True)
        until(lambda: o.get("t/a")["status"] in ("working", "idle"), 30, "t/a resumed")
    new = _row(orcr_home, a["uuid"])["launch_token"]
    assert new and new != old
    panes = _panes_of("t/a")
    assert [p["token"] for p in panes] == [new], panes
