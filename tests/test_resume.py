"""``orcr agent resume`` (issue 10 item 3): a lost agent starts again in a new pane,
in its own session, through the queue, with the same path, uuid and transcript; it
is never doubled, and a provider without resume support says so. The echo agent
continues its transcript, so the whole path runs without API keys."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from orcr_core.testing import until


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
