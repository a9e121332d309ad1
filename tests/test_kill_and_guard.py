"""kill on queued, starting and working agents; the stuck-start guard."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until as _until  # noqa: E402


def _has_event(home, kind):
    return any(e["kind"] == kind for e in home.events())


def test_kill_queued_agent_is_canceled(orcr_home):
    orcr_home.config('[driver]\nname = "test"\n[concurrency]\nmax = 1\n')
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="k/first", cwd="/")
        o.run("x", provider="testp", path="k/second", cwd="/")
        _until(lambda: o.get("k/first")["status"] == "working")
        assert o.get("k/second")["status"] == "queued"
        assert o.kill("k/second") == [
            {"path": "k/second", "uuid": o.get("k/second")["uuid"], "result": "canceled"}
        ]
        a = o.get("k/second")
        assert (a["status"], a["exit_reason"]) == ("ended", "canceled")
        assert o.get("k/first")["status"] == "working"  # nothing else moved
        assert [p["label"] for p in td.read_state()["panes"].values()] == ["k/first"]


def test_kill_starting_agent_cancels_and_closes_its_pane(orcr_home):
    orcr_home.start_server(extra_env={"ORCR_TEST_START_DELAY": "1.0"})
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="k/slow", cwd="/")
        _until(lambda: _has_event(orcr_home, "pane.start_requested"))  # start() is under way
        res = o.kill("k/slow")
        assert res[0]["result"] == "cancel_requested"
        assert o.get("k/slow")["cancel_requested"] is True
        a = _until(lambda: (lambda a: a if a["status"] == "ended" else None)(o.get("k/slow")))
        assert a["exit_reason"] == "canceled"
    state = td.read_state()
    assert state["panes"] == {}  # the pane created during the cancel was closed
    assert [e[0] for e in state["log"]] == ["start", "close"]


def test_kill_working_agent_is_killed_and_glob(server):
    with server.sdk() as o:
        for n in ("a", "b", "c"):
            o.run("x", provider="testp", path=f"g/{n}", cwd="/")
        o.run("x", provider="testp", path="other/z", cwd="/")
        _until(lambda: all(a["status"] == "working" for a in o.list()))
        res = o.kill("g/*")
        assert sorted(r["path"] for r in res) == ["g/a", "g/b", "g/c"]
        assert {r["result"] for r in res} == {"killed"}
        assert [a["path"] for a in o.list()] == ["other/z"]
    assert [p["label"] for p in td.read_state()["panes"].values()] == ["other/z"]


def test_stuck_start_guard_fails_and_frees_slot(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 1\n'
        '[timings]\nmax_starting = "1s"\npoll_every = "50ms"\n'
    )
    orcr_home.start_server(
        extra_env={"ORCR_TEST_START_DELAY": "3", "ORCR_TEST_SLOW_LABEL": "s/hung"}
    )
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="s/hung", cwd="/")
        o.run("x", provider="testp", path="s/next", cwd="/")
        a = _until(lambda: (lambda a: a if a["status"] == "ended" else None)(o.get("s/hung")), 5)
        assert a["exit_reason"] == "failed" and "stuck-start guard" in a["error"]
        _until(lambda: o.get("s/next")["status"] == "starting", 5)  # the slot was freed
        # the hung start's pane shows up later and is closed, never kept
        hung = _until(
            lambda: next(
                (e[2] for e in td.read_state()["log"] if e[:2] == ["start", "s/hung"]), None
            ),
            10,
            "the hung start's pane",
        )
        _until(lambda: ["close", hung] in td.read_state()["log"], 10, "the late pane closed")
        _until(lambda: o.get("s/next")["status"] == "working", 10)
    labels = [p["label"] for p in td.read_state()["panes"].values()]
    assert labels == ["s/next"]


def test_kill_while_the_start_call_hangs_is_canceled_not_failed(orcr_home):
    """The multiplexer's start call hangs past the stuck-start guard after a kill was
    requested: the requested kill decides the outcome (canceled), and the pane the
    hung call makes in the end is closed."""
    orcr_home.config(
        '[driver]\nname = "test"\n[timings]\nmax_starting = "1s"\npoll_every = "50ms"\n'
    )
    orcr_home.start_server(extra_env={"ORCR_TEST_START_DELAY": "3"})
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="h/hung", cwd="/")
        _until(lambda: _has_event(orcr_home, "pane.start_requested"))  # start() hangs
        assert o.kill("h/hung")[0]["result"] == "cancel_requested"
        a = _until(lambda: (lambda a: a if a["status"] == "ended" else None)(o.get("h/hung")), 10)
        assert a["exit_reason"] == "canceled", a
        # the guard expired first (1s < 3s): it ended the row, honouring the kill
        ended = [
            e["data"] for e in orcr_home.events(a["uuid"])
            if e["kind"] == "agent.status" and e["data"]["to"] == "ended"
        ]  # fmt: skip
        assert "stuck-start guard" in ended[0]["reason"]
        _until(lambda: [e[0] for e in td.read_state()["log"]] == ["start", "close"], 10)
        assert td.read_state()["panes"] == {}


def test_kill_while_the_start_call_fails_is_canceled_not_failed(orcr_home):
    """A start call that errors after a kill was requested: still canceled. (One
    server: only h/err's start is slow, so the kill comes during it; h/err2's start
    errors at once.)"""
    orcr_home.start_server(
        extra_env={
            "ORCR_TEST_START_DELAY": "1.0",
            "ORCR_TEST_SLOW_LABEL": "h/err",
            "ORCR_TEST_START_ERROR": "boom",
        }
    )
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="h/err", cwd="/")
        _until(lambda: _has_event(orcr_home, "pane.start_requested"))
        assert o.kill("h/err")[0]["result"] == "cancel_requested"
        a = _until(lambda: (lambda a: a if a["status"] == "ended" else None)(o.get("h/err")), 10)
        assert a["exit_reason"] == "canceled" and a["error"] is None, a
        # without a kill the same error fails the agent
        o.run("x", provider="testp", path="h/err2", cwd="/")
        a = _until(lambda: (lambda a: a if a["status"] == "ended" else None)(o.get("h/err2")), 10)
        assert a["exit_reason"] == "failed" and "boom" in a["error"], a


def test_stuck_start_guard_is_reset_by_each_progress_marker(orcr_home):
    """Two slow steps (workspace, pane) each well within max_starting, together past
    it: the guard is measured from the last progress marker, not from started_at."""
    orcr_home.config(
        '[driver]\nname = "test"\n[timings]\nmax_starting = "2s"\npoll_every = "50ms"\n'
    )
    orcr_home.start_server(
        extra_env={"ORCR_TEST_WORKSPACE_DELAY": "1.3", "ORCR_TEST_START_DELAY": "1.3"}
    )
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="g/slow", cwd="/")
        a = _until(
            lambda: (lambda a: a if a["status"] in ("working", "ended") else None)(o.get("g/slow")),
            15,
        )
        assert a["status"] == "working", a
    ts = {
        e["data"]["to"]: e["ts"] for e in orcr_home.events(a["uuid"]) if e["kind"] == "agent.status"
    }
    assert ts["working"] - ts["starting"] > 2.0  # the start outlived one guard period
    markers = [e["kind"] for e in orcr_home.events(a["uuid"])]
    assert "pane.workspace_applied" in markers and "pane.start_applied" in markers


def test_stuck_start_guard_closes_a_recorded_pane_at_once(orcr_home):
    """The guard fails a start whose pane is recorded but whose first prompt never
    goes in: it closes that pane itself, at once, not on a later reconcile pass
    (reconcile_every is an hour here) nor when the hung call returns (8 s)."""
    orcr_home.config(
        '[driver]\nname = "test"\n'
        '[timings]\nmax_starting = "1s"\npoll_every = "50ms"\nreconcile_every = "1h"\n'
    )
    orcr_home.start_server(extra_env={"ORCR_TEST_PROMPT_DELAY": "8"})
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="g/mute", cwd="/")
        pane = _until(
            lambda: next((e[2] for e in td.read_state()["log"] if e[0] == "start"), None),
            5,
            "the pane",
        )
        a = _until(lambda: (lambda a: a if a["status"] == "ended" else None)(o.get("g/mute")), 5)
        assert a["exit_reason"] == "failed" and "stuck-start guard" in a["error"], a
        _until(lambda: ["close", pane] in td.read_state()["log"], 3, "the guard's close")
        assert td.read_state()["panes"] == {}


def _kinds(home, uuid: str, *kinds: str) -> list[str]:
    return [e["kind"] for e in home.events(uuid) if e["kind"] in kinds]


def test_a_kill_closes_the_pane_once_while_the_monitor_sees_the_kill_too(orcr_home):
    """The kill handler ends a live agent itself; the monitor, polling meanwhile, saw
    ``cancel_requested`` on a live row and ended it too: two close intents and two
    closes (issue 19 item 5). One ending at a time per agent: the second finds it ended."""
    orcr_home.start_server(extra_env={"ORCR_TEST_CLOSE_DELAY": "0.6"})
    with orcr_home.sdk() as o:
        for n in ("a", "b", "c"):
            o.run("x", provider="testp", path=f"c/{n}", cwd="/")
        _until(lambda: all(a["status"] == "working" for a in o.list()))
        res = o.kill("c/*")
        assert {r["result"] for r in res} == {"killed"}
        for n in ("a", "b", "c"):
            a = o.get(f"c/{n}")
            assert (a["status"], a["exit_reason"]) == ("ended", "killed")
            closes = _kinds(orcr_home, a["uuid"], "pane.close_requested", "pane.close_applied")
            assert closes == ["pane.close_requested", "pane.close_applied"], (n, closes)
    assert [e[0] for e in td.read_state()["log"]].count("close") == 3


def test_kill_during_the_workspace_call_starts_no_pane(orcr_home):
    """Seed 000/002: cancel_requested is checked before and after each multiplexer
    call. A kill while the workspace is being made (a slow ensure_workspace) is seen
    right after it: no pane is started and then closed, the row ends canceled."""
    orcr_home.start_server(extra_env={"ORCR_TEST_WORKSPACE_DELAY": "3"})
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="k/ws", cwd="/")
        _until(lambda: o.get("k/ws")["status"] == "starting")
        assert not _has_event(orcr_home, "pane.workspace_applied")  # the call is under way
        assert o.kill("k/ws")[0]["result"] == "cancel_requested"
        a = _until(lambda: (lambda a: a if a["status"] == "ended" else None)(o.get("k/ws")), 15)
        assert a["exit_reason"] == "canceled"
    kinds = [e["kind"] for e in orcr_home.events(a["uuid"])]
    assert "pane.start_requested" not in kinds, kinds
    state = td.read_state()
    assert state["panes"] == {} and [e[0] for e in state["log"]] == [], state["log"]


def _failed_start_waits_on_its_close(o, home, path: str) -> dict:
    """``path``'s prompt is refused (a non-retryable error after its pane is recorded)
    while every close is refused: the failure waits, the row stays ``starting``."""
    o.run("<driver-refuses>", provider="testp", path=path, cwd="/")
    _until(lambda: o.get(path)["error"] is not None, 10, "the failure recorded")
    a = o.get(path)
    assert a["status"] == "starting" and "refused to type" in a["error"], a
    assert _kinds(home, a["uuid"], "pane.close_requested", "pane.close_applied")[-1] == (
        "pane.close_requested"
    )
    (pane,) = td.read_state()["panes"]
    td.remove_pane(pane)  # gone by the time the multiplexer answers (a herdr restart)
    return a


def _close_settled(home, uuid: str) -> None:
    closes = _kinds(home, uuid, "pane.close_requested", "pane.close_applied")
    assert closes[-1] == "pane.close_applied", closes


def test_a_failed_start_keeps_its_close_open_until_the_multiplexer_answers(orcr_home):
    """A start fails while the multiplexer refuses closes: the row stays ``starting``
    with its error and ``pane.close_requested`` open; the monitor retries the close and
    only then ends the row ``failed`` (soak seed 3302 on herdr, issue 33 item 14).
    Planted: ``pipeline._fail`` swallowing the close's error and ending the row -> fails;
    the monitor without its pending-failure branch -> fails."""
    orcr_home.config('[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\n')
    orcr_home.start_server()
    td.set_close_refused(True)
    try:
        with orcr_home.sdk() as o:
            a = _failed_start_waits_on_its_close(o, orcr_home, "f/refused")
            retried = lambda: _kinds(orcr_home, a["uuid"], "pane.close_requested")  # noqa: E731
            _until(lambda: len(retried()) >= 3, 10, "the monitor to retry the close")
            assert o.get("f/refused")["status"] == "starting"
            td.set_close_refused(False)
            a = _until(
                lambda: (lambda r: r if r["status"] == "ended" else None)(o.get("f/refused"))
            )
            assert a["exit_reason"] == "failed" and "refused to type" in a["error"], a
    finally:
        td.set_close_refused(False)
    _close_settled(orcr_home, a["uuid"])


def test_a_failed_start_pending_its_close_is_finished_by_recovery(orcr_home):
    """The server is SIGKILLed while a failed start waits on its pane's close: recovery
    closes it (the pane is gone: applied at once) and ends the row ``failed`` with the
    start's own error. Planted: ``pipeline._fail`` swallowing the close's error -> fails;
    ``reconcile._recover_starting`` without its pending-failure step -> fails."""
    orcr_home.config('[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\n')
    orcr_home.start_server()
    td.set_close_refused(True)
    try:
        with orcr_home.sdk() as o:
            a = _failed_start_waits_on_its_close(o, orcr_home, "f/crash")
        orcr_home.kill_server()
    finally:
        td.set_close_refused(False)
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        a = _until(lambda: (lambda r: r if r["status"] == "ended" else None)(o.get("f/crash")))
        assert a["exit_reason"] == "failed" and "refused to type" in a["error"], a
    _close_settled(orcr_home, a["uuid"])
