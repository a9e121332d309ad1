"""The soak's checker (bench/soak_check.py) bites: synthetic histories, each with one
planted violation, are each caught, and the clean history passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import soak_check  # noqa: E402

CAPS = {"max": 3, "echo": 2}


class History:
    """A hand-made event log, in the store's shape."""

    def __init__(self):
        self.events: list[dict] = []
        self.qseq = 0

    def ev(self, kind, agent=None, loop=None, run=None, **data):
        self.events.append(
            {"seq": len(self.events) + 1, "ts": 1000.0 + len(self.events), "kind": kind,
             "agent": agent, "loop": loop, "run": run, "data": data}
        )  # fmt: skip

    def admit(self, a, provider="echo"):
        self.qseq += 1
        self.ev("agent.queued", a, path=f"p/{a}", provider=provider, queue_seq=self.qseq)

    def move(self, a, frm, to, provider="echo", **kw):
        self.ev(
            "agent.status", a, path=f"p/{a}", provider=provider, **{"from": frm, "to": to}, **kw
        )

    def start(self, a, pane, provider="echo"):
        self.move(a, "queued", "starting", provider)
        self.ev("pane.start_requested", a, path=f"p/{a}", argv=["x"])
        self.ev("pane.start_applied", a, path=f"p/{a}", pane_id=pane, tab_id="@1")
        self.ev("prompt.requested", a, turn=1)
        self.ev("prompt.applied", a, turn=1, confirmed=True)
        self.move(a, "starting", "working", provider)

    def end(self, a, pane, frm="working", provider="echo"):
        self.ev("pane.close_requested", a, pane_id=pane, why="killed")
        self.ev("pane.close_applied", a, pane_id=pane)
        self.move(a, frm, "ended", provider, exit_reason="killed")

    def run(self, loop, run, kind="scheduled", to="ok", code=0):
        self.ev("run.status", loop=loop, run=run, run_id=run, run_kind=kind,
                **{"from": None, "to": "pending"})  # fmt: skip
        self.ev(
            "run.status", loop=loop, run=run, run_id=run, **{"from": "pending", "to": "running"}
        )
        self.ev("run.status", loop=loop, run=run, run_id=run, exit_code=code,
                **{"from": "running", "to": to})  # fmt: skip


def clean() -> History:
    h = History()
    for a in ("a1", "a2", "a3"):
        h.admit(a)
    h.admit("c1", "command")
    h.start("a1", "%1")
    h.start("a2", "%2")
    h.start("c1", "%3", "command")
    h.end("a1", "%1")
    h.start("a3", "%1")  # a pane id reused once its agent ended
    for a, p in (("a2", "%2"), ("a3", "%1")):
        h.end(a, p)
    h.end("c1", "%3", provider="command")
    h.ev("loop.fired", loop="L", due=60.0, queued=False)
    h.run("L", "r1")
    h.ev("loop.fired", loop="L", due=120.0, queued=False)
    h.run("L", "r2", to="failed", code=3)
    return h


def rules(h: History, final=None, caps=CAPS) -> list[str]:
    return [v.rule for v in soak_check.check(h.events, caps, final).violations]


def test_a_clean_history_passes():
    report = soak_check.check(clean().events, CAPS, {"processes": [], "panes": []})
    assert report.violations == [], report.excerpt()
    assert report.counts["agents"] == 4 and report.counts["runs"] == 2


def test_global_cap_exceeded_is_caught():
    h = History()
    for a in ("a1", "a2", "c1", "c2"):
        h.admit(a, "echo" if a[0] == "a" else "command")
    h.start("a1", "%1")
    h.start("a2", "%2")
    h.start("c1", "%3", "command")
    h.start("c2", "%4", "command")  # the 4th live agent, the cap is 3
    report = soak_check.check(h.events, CAPS)
    assert [v.rule for v in report.violations] == ["cap"]
    assert "global cap 3" in report.violations[0].message
    assert report.excerpt()[1].split()[1] == "agent.queued"  # the agent's history is shown


def test_provider_cap_exceeded_is_caught():
    h = History()
    for a in ("a1", "a2", "a3"):
        h.admit(a)
    for n, a in enumerate(("a1", "a2", "a3")):
        h.start(a, f"%{n}")
    assert rules(h) == ["cap"]


def test_fifo_broken_within_a_provider_is_caught():
    h = History()
    h.admit("a1")
    h.admit("c1", "command")
    h.admit("a2")
    h.start("c1", "%1", "command")  # another provider may pass: not a violation
    h.start("a2", "%2")  # a2 overtakes a1, queued before it
    assert rules(h) == ["fifo"]


def test_a_resumed_row_queues_behind_by_its_new_queue_seq():
    h = History()
    h.admit("a1")
    h.start("a1", "%1")
    h.move("a1", "working", "lost")
    h.admit("a2")
    h.move("a1", "lost", "queued", resume=True, auto=True, queue_seq=99)
    h.start("a2", "%2")  # queued before a1's requeue: it goes first
    assert rules(h) == []
    h.move("a1", "ended", "queued")  # out of ended only by a resume
    assert "status" in rules(h)


def test_requested_without_applied_is_caught_and_a_repair_settles_it():
    h = History()
    h.admit("a1")
    h.start("a1", "%1")
    h.ev("pane.close_requested", "a1", pane_id="%1", why="killed")
    h.move("a1", "working", "ended", exit_reason="killed")  # never applied
    report = soak_check.check(h.events, CAPS)
    assert [v.rule for v in report.violations] == ["applied"]
    assert "pane.close_requested" in report.violations[0].message
    h.events.pop()
    h.move("a1", "working", "ended", exit_reason="lost", repair=True)
    assert rules(h) == []


def test_illegal_status_path_is_caught():
    h = History()
    h.admit("a1")
    h.move("a1", "queued", "working")  # skipped starting
    assert rules(h) == ["status"]


def test_two_agents_on_one_pane_is_caught():
    h = History()
    h.admit("a1")
    h.admit("a2")
    h.start("a1", "%1")
    h.start("a2", "%1")
    assert rules(h) == ["pane"]


def test_a_pane_id_a_new_multiplexer_server_reuses_under_a_starting_agent_passes():
    """a1 got %1, the multiplexer died before a1's prompt (the soak's aimed kill), and its
    next server gave %1 to a2 while a1's pipeline had not found its pane gone: no double
    booking. Planted: a starting holder counted as holding -> 'pane'."""
    h = History()
    h.admit("a1")
    h.admit("a2")
    h.move("a1", "queued", "starting")
    h.ev("pane.start_requested", "a1", path="p/a1", argv=["x"])
    h.ev("pane.start_applied", "a1", path="p/a1", pane_id="%1", tab_id="@1")
    h.start("a2", "%1")
    h.move("a1", "starting", "ended", exit_reason="failed", error="its pane is gone")
    h.end("a2", "%1")
    assert rules(h) == []


@pytest.mark.parametrize("plant", ["same_due", "missed_then_fired"])
def test_replayed_fire_is_caught(plant):
    h = History()
    h.ev("loop.fired", loop="L", due=60.0, queued=False)
    if plant == "same_due":
        h.ev("loop.fired", loop="L", due=60.0, queued=False)
    else:
        h.ev("loop.missed", loop="L", first="2026-12-01T22:02:00.000Z", count=2,
             next_fire_at="2026-12-01T22:04:00.000Z", reason="server_down")  # fmt: skip
        h.ev("loop.fired", loop="L", due="2026-12-01T22:03:00.000Z", queued=False)
    assert rules(h) == ["fire"]


def test_coalesced_fires_and_fires_after_a_miss_pass():
    h = History()
    h.ev("loop.fired", loop="L", due="2026-12-01T22:01:00.000Z", queued=True)
    # folded into the pending run: its due_at stays the earliest, the fire's own is later
    h.ev("loop.coalesced", loop="L", due="2026-12-01T22:02:00.000Z",
         due_at="2026-12-01T22:01:00.000Z", fires=2)  # fmt: skip
    h.ev("loop.missed", loop="L", first="2026-12-01T22:03:00.000Z", count=2,
         next_fire_at="2026-12-01T22:05:00.000Z", reason="server_down")  # fmt: skip
    h.ev("loop.fired", loop="L", due="2026-12-01T22:05:00.000Z", queued=False)
    assert rules(h) == []


def test_run_ending_twice_or_with_a_wrong_status_is_caught():
    h = History()
    h.run("L", "r1")
    h.ev("run.status", loop="L", run="r1", run_id="r1", **{"from": "ok", "to": "failed"})
    assert rules(h) == ["run"]
    h = History()
    h.run("L", "r1", to="ok", code=3)  # exit 3 is not ok
    assert rules(h) == ["run"]
    h = History()
    h.ev("run.status", loop="L", run="r1", run_id="r1", run_kind="scheduled",
         **{"from": None, "to": "pending"})  # fmt: skip
    assert rules(h) == ["run"]  # never reached a final status


def test_two_pending_scheduled_runs_and_loop_concurrency_are_caught():
    h = History()
    for r in ("r1", "r2"):
        h.ev("run.status", loop="L", run=r, run_id=r, run_kind="scheduled",
             **{"from": None, "to": "pending"})  # fmt: skip
    assert "run" in rules(h)
    h = History()
    for r in ("r1", "r2"):
        h.ev("run.status", loop="L", run=r, run_id=r, run_kind="manual",
             **{"from": None, "to": "pending"})  # fmt: skip
        h.ev("run.status", loop="L", run=r, run_id=r, **{"from": "pending", "to": "running"})
    assert rules(h, caps=dict(CAPS, loops={"L": 1})).count("run") >= 1


def test_leftovers_at_the_end_are_caught():
    assert rules(clean(), {"processes": ["123 python -m orcr_providers.echo_agent"]}) == ["final"]
    assert rules(clean(), {"panes": ["w0/a"]}) == ["final"]


def test_a_prompt_typed_into_a_tab_opened_after_a_herdr_restart_is_caught():
    """The herdr fault's aim (bench/_soak_faults.py ``herdr_under_a_start``) reports a
    prompt seen on a tab it opened after the restart; the checker turns it into a
    violation. Planted with the soak: ``HerdrDriver._input`` without its marks check
    (docs/internals.md "Chaos soak")."""
    typed = ["w0/a's first prompt typed into w3:p2, a tab opened after herdr's restart"]
    assert rules(clean(), {"typed_elsewhere": typed}) == ["pane"]
    assert rules(clean(), {"typed_elsewhere": []}) == []


def test_a_start_that_failed_settles_its_intents_but_never_a_close():
    h = History()
    h.admit("a1")
    h.move("a1", "queued", "starting")
    h.ev("pane.start_requested", "a1", argv=["x"])
    h.ev("pane.start_applied", "a1", pane_id="%1", tab_id="@1")
    h.ev("prompt.requested", "a1", turn=1)
    h.ev("prompt.paste_requested", "a1", turn=1)  # the pane died under the paste
    h.ev("pane.close_requested", "a1", pane_id="%1", why="start failed")
    h.ev("pane.close_applied", "a1", pane_id="%1")
    h.move("a1", "starting", "ended", exit_reason="failed", error="the program exited")
    assert rules(h) == []
    del h.events[-2]  # the close never applied: the end does not settle it
    assert rules(h) == ["applied"]


def _task(root: Path, state: str, tid: str, attempts: int, sections: list[str]) -> None:
    (root / state).mkdir(parents=True, exist_ok=True)
    body = "".join(f"\n## {s} (2026-12-01T22:00:00+00:00)\n\nwhy\n" for s in sections)
    (root / state / f"{tid}.md").write_text(
        f'---\nid: "{tid}"\ndone_when: "x"\nattempts: {attempts}\n---\nDo it.\n{body}'
    )


def test_task_files_attempts_counted_once_and_one_state(tmp_path):
    _task(tmp_path, "todo", "T1", 2, ["Attempt failed 1", "Reject (verifier echo) 2"])
    _task(tmp_path, "done", "T2", 0, ["Pass 1 (verifier echo, 2026-12-01)"])
    assert soak_check.check_tasks(tmp_path) == []
    # an attempt double-counted: one failed build, attempts 2
    _task(tmp_path, "failed", "T3", 3, ["Attempt failed 1", "Attempt failed 3"])
    _task(tmp_path, "todo", "T4", 1, [])  # counted with no failed build behind it
    _task(tmp_path, "doing", "T2", 0, [])  # in two states at once
    found = soak_check.check_tasks(tmp_path)
    assert sorted(v.message.split()[1] for v in found) == ["T2", "T3", "T4"], found
    assert {v.rule for v in found} == {"task"}
    report = soak_check.check(clean().events, CAPS, {"task_queues": [str(tmp_path)]})
    assert [v.rule for v in report.violations] == ["task"] * 3


def test_a_task_built_twice_at_once_is_caught():
    h = History()
    for a in ("b1", "b2"):
        h.ev("agent.queued", a, path=f"tasks/q/T1/build_{a}", provider="command", queue_seq=1)
    for a in ("b1", "b2"):
        h.ev("agent.status", a, path=f"tasks/q/T1/build_{a}", provider="command",
             **{"from": "queued", "to": "starting"})  # fmt: skip
    assert rules(h) == ["task"]


def test_a_fire_later_than_missed_after_is_caught():
    """The event's own time against its due time: a fire decided on a clock that missed
    a wall-clock jump (a sleep) is a missed fire replayed."""
    h = History()
    h.ev("loop.fired", loop="L", due=1000.0 - 1.0 - soak_check.LATE_SLACK, queued=False)
    h.ev("loop.fired", loop="L", due=1001.0, queued=False)  # ts 1000, 1001
    caps = dict(CAPS, missed_after=1.0)
    assert rules(h, caps=caps) == []  # on time, and late by no more than the slack
    h.ev("loop.fired", loop="L", due=1002.0, queued=False)
    h.events[-1]["ts"] = 1002.0 + 1.0 + soak_check.LATE_SLACK + 0.5  # written that late
    assert rules(h) == []  # without missed_after there is no lateness to judge
    report = soak_check.check(h.events, caps)
    assert [v.rule for v in report.violations] == ["fire"]
    assert "late" in report.violations[0].message


def _agent(root: Path, prompt: str | None, received: list[str]) -> None:
    folder = root / f"u{len(list(root.iterdir())) if root.exists() else 0}"
    folder.mkdir(parents=True)
    (folder / "launch.json").write_text(json.dumps({"uuid": folder.name, "path": "w/a",
                                                     "prompt": prompt}))  # fmt: skip
    lines = [{"type": "session", "pid": 1}]
    lines += [{"type": "prompt", "turn": n + 1, "text": t} for n, t in enumerate(received)]
    (folder / "echo.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"ty')


def test_a_prompt_received_twice_or_doubled_is_caught(tmp_path):
    _agent(tmp_path, "[sleep 1] hi", ["[sleep 1] hi", "again"])
    _agent(tmp_path, None, ["sent later"])  # started idle, then a send
    assert soak_check.check_transcripts(tmp_path) == []
    _agent(tmp_path, "[sleep 1] hi", ["[sleep 1] hi[sleep 1] hi"])  # pasted twice, one Enter
    _agent(tmp_path, None, ["again", "again"])  # typed again after its Enter
    found = soak_check.check_transcripts(tmp_path)
    assert [v.rule for v in found] == ["once", "once"]
    assert "first turn" in found[0].message and "twice" in found[1].message
    report = soak_check.check(clean().events, CAPS, {"agent_dirs": [str(tmp_path)]})
    assert [v.rule for v in report.violations] == ["once"] * 2


def test_a_first_prompt_reported_lost_with_its_program_may_be_followed_by_a_send(tmp_path):
    """herdr SIGKILLed between the first prompt's keys and the program reading them: the
    resume reports turn 1 never reached the agent (send it again), and the next send is
    the transcript's first turn (1-hour herdr soak, seed 2845, ``w0/fail_62``). Without
    that report it stays a ``once`` violation."""
    _agent(tmp_path, "[sleep 1] hi", ["a later send"])
    h = clean()
    found = soak_check.check(h.events, CAPS, {"agent_dirs": [str(tmp_path)]}).violations
    assert [v.rule for v in found] == ["once"]
    h.ev("agent.status", agent="u0", to="idle", turn=1, turn_status="interrupted",
         turn_error="the prompt sent as turn 1 never reached the agent: it was lost")  # fmt: skip
    found = soak_check.check(h.events, CAPS, {"agent_dirs": [str(tmp_path)]}).violations
    assert "once" not in [v.rule for v in found]  # (its lone status event breaks others)


def test_the_soak_clock_jumps_wall_time_and_keeps_file_ages(tmp_path):
    """bench/_soak_clock: time, datetime and files' times jump together; the monotonic
    clock does not; a file touched after the jump is fresh, one set to 50 s ago is."""
    clock = tmp_path / "clock"
    clock.write_text("0\n")
    code = """if True:
        import datetime, os, pathlib, sys, time
        f = pathlib.Path(sys.argv[1]) / "f"
        f.write_text("x")
        t0, m0, d0 = time.time(), time.monotonic(), datetime.datetime.now()
        pathlib.Path(sys.argv[2]).write_text("3600")
        time.sleep(0.3)
        os.utime(f)
        print(round(time.time() - t0), round(time.monotonic() - m0),
              round((datetime.datetime.now() - d0).total_seconds()),
              round(time.time() - f.stat().st_mtime), time.strftime("%H") != time.strftime(
                  "%H", time.localtime(t0)) or time.localtime().tm_hour != time.localtime(t0).tm_hour)
        os.utime(f, (time.time() - 50, time.time() - 50))
        print(round(time.time() - os.stat(f).st_mtime), isinstance(d0, datetime.datetime))
    """
    bench = Path(__file__).resolve().parent.parent / "bench" / "_soak_clock"
    env = dict(os.environ, PYTHONPATH=str(bench), ORCR_SOAK_CLOCK=str(clock))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(clock)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert out == ["3600", "0", "3600", "0", "True", "50", "True"], out


def test_a_delivery_resumed_after_a_mux_error_settles_its_steps_by_prompt_applied():
    """herdr refused the Enter (shutting down); the resumed delivery found the turn and
    recorded prompt.applied without an enter_applied: settled. Without it: caught."""
    h = History()
    h.admit("a1")
    h.move("a1", "queued", "starting")
    h.ev("pane.start_requested", "a1", argv=["x"])
    h.ev("pane.start_applied", "a1", pane_id="w1:p1", tab_id="w1:t1")
    h.ev("prompt.requested", "a1", turn=1)
    h.ev("prompt.paste_requested", "a1", turn=1)
    h.ev("prompt.paste_applied", "a1", turn=1)
    h.ev("prompt.enter_requested", "a1", turn=1)
    h.ev("prompt.resubmit", "a1", attempt=1)
    h.ev("prompt.applied", "a1", turn=1, confirmed=False)
    h.move("a1", "starting", "working")
    h.end("a1", "w1:p1")
    assert rules(h) == []
    del h.events[9]  # no prompt.applied: the Enters' intents stay open
    assert rules(h) == ["applied", "applied", "applied"]


def test_a_task_cut_by_a_full_disk_or_lost_is_caught(tmp_path):
    _task(tmp_path, "todo", "T1", 0, [])
    assert soak_check.check_tasks(tmp_path, ["T1"]) == []
    (tmp_path / "todo" / "T2.md").write_text("")  # written in place when the disk was full
    (tmp_path / "quarantine").mkdir()
    (tmp_path / "quarantine" / "T3.md").write_text("---\nid: ")  # moved aside, unreadable
    found = soak_check.check_tasks(tmp_path, ["T1", "T2", "T3"])
    assert sorted(v.message.split()[1] for v in found) == ["T2", "T3"], found
    assert "cut or empty" in found[-1].message or "cut or empty" in found[0].message


def test_gc_of_a_working_agent_is_caught():
    """The 1-hour soak (seed 2701): GC decided on an idle read while ``agent send`` made
    the agent working, then ended it ``gc`` from working mid-delivery."""
    h = History()
    h.admit("a1")
    h.move("a1", "queued", "starting")
    h.move("a1", "starting", "idle", reason="no prompt")
    h.move("a1", "idle", "working")
    h.move("a1", "working", "ended", exit_reason="gc")
    assert rules(h) == ["status"]
    h.events[-1]["data"]["exit_reason"] = "killed"
    assert rules(h) == []
    h.move("a1", "ended", "ended", exit_reason="timeout")  # and a timeout only from working
    assert "status" in rules(h)
