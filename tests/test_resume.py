"""``orcr agent resume`` (issue 10 item 3): a lost agent starts again in a new pane,
in its own session, through the queue, with the same path, uuid and transcript; it
is never doubled, and a provider without resume support says so. The echo agent
continues its transcript, so the whole path runs without API keys."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from orcr_core.kit.testing import until


def _kill_multiplexer(live) -> None:
    if live.mux.kind == "herdr":
        live.mux.emulator.restart()  # the agent's pane comes back as a plain shell
    else:
        subprocess.run(["tmux", "-S", str(live.mux.socket), "kill-server"], check=True)


def _transcript_prompts(live, uuid: str) -> list[tuple[int, str]]:
    path = live.path / "agents" / uuid / "echo.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r["turn"], r["text"]) for r in records if r.get("type") == "prompt"]


def test_resume_a_lost_agent_in_its_own_session(live):
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "e/one", "first", check=True)
    live.run("agent", "wait", "e/one", "--timeout", "30s", check=True)
    before = live.get("e/one")
    _kill_multiplexer(live)
    ended = until(lambda: (a := live.get("e/one"))["status"] == "ended" and a, 30)
    assert ended["exit_reason"] == "lost"

    out = live.run("agent", "resume", "e/one", check=True).stdout.split()
    assert out == ["e/one", before["uuid"]]  # same path, same uuid
    again = live.run("agent", "resume", "e/one")  # never doubled
    assert again.returncode != 0 and "not_resumable" in again.stderr, again.stderr
    until(lambda: live.get("e/one")["status"] == "idle", 30, what="resumed, idle")
    # the path is still taken: no second agent on it
    taken = live.run("agent", "run", "-p", "echo", "--path", "e/one", "x")
    assert taken.returncode != 0 and "path_in_use" in taken.stderr

    live.run("agent", "send", "e/one", "second", check=True)
    live.run("agent", "wait", "e/one", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "e/one", check=True).stdout == "second\n"
    # one transcript, continued: turn 2 follows turn 1, the first prompt not typed again
    assert _transcript_prompts(live, before["uuid"]) == [(1, "first"), (2, "second")]
    statuses = [e["data"] for e in live.events(before["uuid"]) if e["kind"] == "agent.status"]
    requeued = [d for d in statuses if d["to"] == "queued" and d.get("resume")]
    assert len(requeued) == 1 and requeued[0]["from"] == "ended", statuses
    # its new place in the queue is in the event (the soak's FIFO check reads it)
    assert requeued[0]["queue_seq"] == live.get("e/one")["queue_seq"] > 1, statuses
    starts = [e for e in live.events(before["uuid"]) if e["kind"] == "pane.start_requested"]
    assert len(starts) == 2 and "--resume" in starts[1]["data"]["argv"]
    assert "--resume" not in starts[0]["data"]["argv"]


def test_resume_refuses_what_it_cannot_resume(orcr_home):
    orcr_home.start_server()
    orcr_home.run("agent", "run", "-p", "testp", "--path", "n/live", "hi", check=True)
    until(lambda: orcr_home.get("n/live")["status"] in ("working", "idle"), 30)
    r = orcr_home.run("agent", "resume", "n/live")
    assert r.returncode != 0 and ("not_resumable" in r.stderr or "resume" in r.stderr), r.stderr
    orcr_home.run("agent", "run", "-p", "command", "--path", "n/cmd", "--", "sleep", "60")
    until(lambda: orcr_home.get("n/cmd")["status"] in ("working", "idle", "ended"), 30)
    orcr_home.run("agent", "kill", "n/cmd", check=True)
    r = orcr_home.run("agent", "resume", "n/cmd")
    assert r.returncode != 0 and "resume_unsupported" in r.stderr, r.stderr
    assert "command" in r.stderr
    r = orcr_home.run("agent", "resume", "n/nothing")
    assert r.returncode != 0 and "not_found" in r.stderr


def test_resume_lost_resumes_by_itself(live):
    """``[recovery] resume_lost``: the multiplexer dies under an idle echo agent; it
    comes back in its own session with no command, and goes on with the next turn."""
    live.config(
        live.mux.config() + '[timings]\npoll_every = "50ms"\n[recovery]\nresume_lost = true\n'
    )
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "e/auto", "first", check=True)
    live.run("agent", "wait", "e/auto", "--timeout", "30s", check=True)
    uuid = live.get("e/auto")["uuid"]
    _kill_multiplexer(live)
    until(lambda: live.get("e/auto")["status"] == "idle" and _requeued(live, uuid), 60)
    assert _requeued(live, uuid)[0].get("auto") is True and len(_requeued(live, uuid)) == 1
    live.run("agent", "send", "e/auto", "second", check=True)
    live.run("agent", "wait", "e/auto", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "e/auto", check=True).stdout == "second\n"
    assert _transcript_prompts(live, uuid) == [(1, "first"), (2, "second")]
    assert live.get("e/auto")["uuid"] == uuid
    ended = [
        e for e in live.events(uuid) if e["kind"] == "agent.status" and e["data"]["to"] == "ended"
    ]
    assert ended == []  # never ended on the way: lost, then queued again


def _requeued(live, uuid: str) -> list[dict]:
    return [
        e["data"]
        for e in live.events(uuid)
        if e["kind"] == "agent.status" and e["data"]["to"] == "queued" and e["data"].get("resume")
    ]


def test_a_resumed_tui_gets_no_prompt_before_its_input_is_ready(live, short_tmp):
    """A resumed agent is ``idle`` only once its TUI shows its input: the real Claude
    Code 1.0.98 draws nothing for a while after ``--resume`` and drops what is typed
    meanwhile (the real_cli tier lost its next prompt that way). The fake Claude does
    the same with ``--fake-slow-start``; the prompt sent at once still arrives."""
    fakes = Path(__file__).resolve().parent / "fakes"
    argv = [str(fakes / "claude"), "--fake-slow-start", "2"]
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\nprompt_confirm = "1s"\n'
        + f'[providers.claude]\nhome = "{short_tmp / "claude"}"\nargv = {json.dumps(argv)}\n'
    )
    live.start_server()
    live.run("agent", "run", "-p", "claude", "--path", "c/slow", "first", check=True)
    live.run("agent", "wait", "c/slow", "--timeout", "30s", check=True)
    uuid = live.get("c/slow")["uuid"]
    _kill_multiplexer(live)
    until(lambda: live.get("c/slow")["status"] == "ended", 30, what="lost")
    live.run("agent", "resume", "c/slow", check=True)
    until(lambda: live.get("c/slow")["status"] == "idle", 30, what="resumed, idle")
    live.run("agent", "send", "c/slow", "second", check=True)
    r = live.run("agent", "wait", "c/slow", "--timeout", "30s")
    assert (r.returncode, r.stdout.strip()) == (0, "c/slow idle"), (r.stderr, live.server_log())
    transcript = next((short_tmp / "claude" / "projects").glob(f"*/{uuid}.jsonl"))
    records = [json.loads(ln) for ln in transcript.read_text().splitlines()]
    prompts = [
        r["message"]["content"]
        for r in records
        if r["type"] == "user" and isinstance(r["message"]["content"], str)
    ]
    assert prompts == ["first", "second"]


def _working_on_turn_2(live, path: str) -> str:
    """An echo agent answers turn 1, then works on turn 2 (for two minutes). Returns its uuid."""
    live.run("agent", "run", "-p", "echo", "--path", path, "first", check=True)
    live.run("agent", "wait", path, "--timeout", "30s", check=True)
    live.run("agent", "send", path, "[sleep 120] second", check=True)
    until(lambda: live.get(path)["status"] == "working", 30, what="turn 2 under way")
    uuid = live.get(path)["uuid"]
    until(lambda: (2, "[sleep 120] second") in _transcript_prompts(live, uuid), 30)
    return uuid


def _lose_while_down(live) -> None:
    """The multiplexer dies while the server is down (a reboot: the server SIGKILLed):
    the agent is lost from ``working`` (no monitor saw its TUI write the turn's end)."""
    live.kill_server()
    _kill_multiplexer(live)
    live.start_server()


def _check_interrupted_then_next_turn(live, path: str, uuid: str) -> None:
    a = live.get(path)
    assert (a["status"], a["turn"], a["turn_status"]) == ("idle", 2, "interrupted"), a
    assert "lost during this turn" in a["turn_error"]
    # wait and read agree: turn 2 ended without an answer (exit 7), not a success
    w = live.run("agent", "wait", path, "--timeout", "10s")
    assert w.returncode == 7 and "turn 2 interrupted" in w.stderr, (w.stdout, w.stderr)
    r = live.run("agent", "read", path)
    assert r.returncode == 7 and "turn 2 interrupted" in r.stderr, (r.stdout, r.stderr)
    # the prompt of the lost turn is not typed again; the next turn is turn 3
    assert _transcript_prompts(live, uuid) == [(1, "first"), (2, "[sleep 120] second")]
    live.run("agent", "send", path, "third", check=True)
    live.run("agent", "wait", path, "--timeout", "30s", check=True)
    a = live.get(path)
    assert (a["status"], a["turn"], a["turn_status"], a["turn_error"]) == (
        "idle",
        3,
        "completed",
        None,
    )
    assert live.run("agent", "read", path, check=True).stdout == "third\n"
    assert _transcript_prompts(live, uuid)[-1] == (3, "third")
    assert live.mux.labels() == [path]  # one pane


def test_an_agent_lost_mid_turn_is_resumed_with_that_turn_interrupted(live):
    """The turn under way when the pane was lost is over: the resumed agent comes up
    idle, still at turn 2 (the prompts sent), with turn 2 interrupted (the transcript
    has no answer for it) and nothing typed again; the next prompt is turn 3."""
    live.start_server()
    uuid = _working_on_turn_2(live, "m/one")
    _lose_while_down(live)
    ended = until(lambda: (a := live.get("m/one"))["status"] == "ended" and a, 30)
    assert ended["exit_reason"] == "lost" and ended["turn"] == 2
    live.run("agent", "resume", "m/one", check=True)
    until(lambda: live.get("m/one")["status"] == "idle", 30, what="resumed, idle")
    resumed = [
        e["data"]
        for e in live.events(uuid)
        if e["kind"] == "agent.status" and e["data"].get("reason") == "resumed"
    ]
    assert len(resumed) == 1 and resumed[0]["turn_status"] == "interrupted"
    assert resumed[0]["turn"] == 2
    _check_interrupted_then_next_turn(live, "m/one", uuid)


def test_a_wait_through_an_automatic_resume_reports_the_lost_turn(live):
    """``resume_lost``: a wait started on the working agent rides out the server
    restart, the loss and the resume, and returns the agent idle with turn 2
    interrupted (which ``agent wait`` turns into exit 7), not the earlier turn's
    success. The SDK's wait with autostart off: a CLI ``agent wait`` would start a
    server of its own while this one is down."""
    live.config(
        live.mux.config() + '[timings]\npoll_every = "50ms"\n[recovery]\nresume_lost = true\n'
    )
    live.start_server()
    uuid = _working_on_turn_2(live, "m/auto")
    opened, result = threading.Event(), {}

    def wait() -> None:
        try:
            with live.sdk() as o:
                result["agent"] = o.wait("m/auto", timeout=120, on_change=lambda a: opened.set())
        except Exception as exc:  # reported by the assertion below
            result["error"] = exc

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert opened.wait(30), result
    _lose_while_down(live)  # the wait reconnects to the restarted server
    waiter.join(150)
    assert "agent" in result, result
    got = result["agent"]
    assert (got["status"], got["turn"], got["turn_status"]) == ("idle", 2, "interrupted"), got
    assert _requeued(live, uuid)[0].get("auto") is True
    _check_interrupted_then_next_turn(live, "m/auto", uuid)


def _turn_ends(live, uuid: str) -> list[tuple[int, str]]:
    path = live.path / "agents" / uuid / "echo.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r["turn"], r["status"]) for r in records if r.get("type") == "turn_end"]


def test_a_turn_that_finished_before_the_loss_keeps_its_answer(live):
    """The turn ended in the transcript while no server watched, then the pane was
    lost: the resumed agent's row takes the transcript's word (completed) and the
    answer is read, neither reported interrupted nor left saying how turn 1 ended."""
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "m/done", "[fail] first", check=True)
    assert live.run("agent", "wait", "m/done", "--timeout", "30s").returncode == 7  # errored
    uuid = live.get("m/done")["uuid"]
    live.run("agent", "send", "m/done", "[sleep 3] second", check=True)
    until(lambda: (2, "[sleep 3] second") in _transcript_prompts(live, uuid), 30)
    live.kill_server()  # working when the server died
    until(lambda: (2, "completed") in _turn_ends(live, uuid), 30, what="turn 2 done")
    _kill_multiplexer(live)
    live.start_server()
    ended = until(lambda: (a := live.get("m/done"))["status"] == "ended" and a, 30)
    assert ended["exit_reason"] == "lost"
    live.run("agent", "resume", "m/done", check=True)
    until(lambda: live.get("m/done")["status"] == "idle", 30, what="resumed, idle")
    a = live.get("m/done")
    assert (a["turn"], a["turn_status"], a["turn_error"]) == (2, "completed", None), a
    assert live.run("agent", "wait", "m/done", "--timeout", "10s", check=True).returncode == 0
    assert live.run("agent", "read", "m/done", check=True).stdout == "second\n"


def test_a_codex_agent_resumes_its_own_thread(live, short_tmp):
    """Resume uses the agent's recorded session pointer, never its uuid: Codex picks
    its own thread id, so ``codex resume <thread>`` is the only way back into the
    conversation (the fake Codex refuses a thread it has no rollout for, as Codex
    does). One rollout holds both turns."""
    from fake_clis import configure, run_agent, wait_idle

    configure(live, short_tmp)
    live.start_server()
    uuid = run_agent(live, "codex", "c/one", "first")
    wait_idle(live, "c/one", timeout=60)
    thread = until(lambda: (live.get("c/one").get("agent_session") or {}).get("value"), 30)
    assert thread != uuid
    _kill_multiplexer(live)
    until(lambda: live.get("c/one")["status"] == "ended", 30, what="lost")

    live.run("agent", "resume", "c/one", check=True)
    wait_idle(live, "c/one", timeout=60)
    starts = [e["data"]["argv"] for e in live.events(uuid) if e["kind"] == "pane.start_requested"]
    assert len(starts) == 2 and starts[1][starts[1].index("resume") + 1] == thread, starts
    live.run("agent", "send", "c/one", "second", check=True)
    wait_idle(live, "c/one", timeout=60)
    assert live.run("agent", "read", "c/one", check=True).stdout == "second\n"
    assert live.get("c/one")["agent_session"]["value"] == thread
    rollouts = list((short_tmp / "codex" / "sessions").rglob("rollout-*.jsonl"))
    assert [r.name.endswith(f"-{thread}.jsonl") for r in rollouts] == [True]
    prompts = [
        json.loads(line)["payload"]["message"]
        for line in rollouts[0].read_text().splitlines()
        if '"type":"user_message"' in line
    ]
    assert prompts == ["first", "second"]


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_pane_of_the_launch_a_resume_replaced_is_closed_as_late(live):
    """A pane carrying the token of the launch a resume replaced is late: that launch
    is over. The 1-hour herdr soak (seed 2832) left one to its end: a parked agent,
    herdr SIGKILLed and restored from a save made before the move, the agent lost and
    resumed, and the restored pane (the old token) counted an orphan for good.
    Planted: reconcile without the ``past_tokens`` look-up -> fails (not closed); the
    close stopping the row's recorded processes too (``whole=True``) -> fails (the
    resumed agent killed with the old pane)."""
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nreconcile_every = "200ms"\n')
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "e/late", "first", check=True)
    live.run("agent", "wait", "e/late", "--timeout", "30s", check=True)
    uuid = live.get("e/late")["uuid"]

    def tmux(*args: str) -> str:
        cmd = ["tmux", "-S", str(live.mux.socket), *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    old = tmux("show-options", "-p", "-t", live.get("e/late")["pane_id"], "-v", "@orcr_token")
    _kill_multiplexer(live)
    until(lambda: live.get("e/late")["status"] == "ended", 30, what="e/late lost")
    live.run("agent", "resume", "e/late", check=True)
    until(lambda: live.get("e/late")["status"] == "idle", 30, what="resumed, idle")
    pane = live.get("e/late")["pane_id"]
    me = tmux("show-options", "-p", "-t", pane, "-v", "@orcr_instance")
    assert old and tmux("show-options", "-p", "-t", pane, "-v", "@orcr_token") != old
    # the running launch's processes recorded (procs.json) before its old pane shows up:
    # closing that pane must stop the old pane's tree only (CI once saw the resumed
    # agent killed with it, its recorded processes taken for the late pane's)
    pid = int(tmux("display-message", "-p", "-t", pane, "#{pane_pid}"))
    procs = live.path / "agents" / uuid / "procs.json"
    until(lambda: procs.exists() and json.loads(procs.read_text())["root"][0] == pid, 30,
          what="the resumed launch's processes recorded")  # fmt: skip
    late = tmux("split-window", "-d", "-P", "-F", "#{pane_id}", "-t", pane, "sleep 600")
    for option, value in (("@orcr_path", "e/late"), ("@orcr_instance", me), ("@orcr_token", old)):
        tmux("set-option", "-p", "-t", late, option, value)
    until(lambda: late not in tmux("list-panes", "-a", "-F", "#{pane_id}").split(), 30,
          what="the old launch's pane closed")  # fmt: skip
    closes = [e["data"] for e in live.events(uuid) if e["kind"] == "pane.close_requested"]
    assert any(d["pane_id"] == late and "earlier launch" in d["why"] for d in closes), closes
    time.sleep(1.0)  # the close's TERM, and KILL after timings.stop_grace, had their time
    assert live.get("e/late")["status"] == "idle"  # the agent itself goes on
    os.kill(pid, 0)  # its process too
