"""The fleet tier for Gemini CLI (issue 33 item 10), the Claude Code and Codex fleet's
(tests/real_cli/test_fleet.py) hard cases on real Gemini CLI TUIs, on tmux:
4 agents admitted in one burst under caps max 3 / gemini 3, the server SIGKILLed
while their first prompts are being delivered and started again at once; one agent
killed so the queued one is promoted; the tmux server killed with
``recovery.resume_lost`` on, every agent resumed in its own session (``gemini
--resume``: each waits for its history before a prompt) and asked again. Checked:
every answer, each prompt received by the model exactly once (the fake API's
record), the conversation kept across the resume, the caps and FIFO order (the
event log). The memory floor is the Claude Code and Codex fleet's alone: it is the
server's, not a provider's. Fewer agents than theirs: a Gemini CLI start takes 20-30 s
of CPU on the shared 2-core machine."""

from __future__ import annotations

import subprocess

import pytest
from fake_models import Script, Text
from real_cli import fleet

from orcr_core.kit.testing import until
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client

CAP = 3
NAMES = ["g1", "g2", "g3", "g4"]


def prompt(name: str) -> str:
    return f"fleet task {name}: say your answer"


def again(name: str) -> str:
    return f"fleet again {name}: after the restart"


def answer(name: str) -> str:
    return f"Answer for {name}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_fleet_of_gemini_through_a_burst_crashes_and_a_resume(real):
    real.timings.update(prompt_confirm="3s", max_starting="4m")
    turns = {}
    for n in NAMES:
        # streamed over about a second: turns overlap the crash and each other
        turns[f"fleet task {n}:"] = Text(answer(n), delay=0.1, chunk=3)
        turns[f"fleet again {n}:"] = f"Again {n}"
    real.gemini(
        Script(turns),
        extra=f"[concurrency]\nmax = {CAP}\ngemini = {CAP}\n[recovery]\nresume_lost = true\n",
    )
    home = real.home
    sent: list[str] = []
    paths = [f"f/{n}" for n in NAMES]

    # -- a burst of 4 at once; the server SIGKILLed mid-delivery and started again
    specs = [
        dict(prompt=prompt(n), provider="gemini", path=f"f/{n}", cwd=str(real.cwd)) for n in NAMES
    ]
    with Orcr(Client(home.socket, autostart=False)) as o:
        results = o.run_many(specs)
    assert all("uuid" in r for r in results), results
    sent += [s["prompt"] for s in specs]
    until(
        lambda: sum(e["kind"] == "prompt.requested" for e in home.events()) >= 1,
        240,
        "a first prompt being typed",
    )
    home.kill_server()
    home.start_server()
    for path in paths[:CAP]:
        real.wait_idle(path, timeout=300)
    status = home.status()
    assert status["live"] == CAP and status["queue_depth"] == 1, status

    # -- one killed: the queued fourth is promoted in its place
    real.orcr("agent", "kill", "f/g1")
    real.wait_idle("f/g4", timeout=300)
    for n in NAMES[1:]:
        assert real.read(f"f/{n}")["text"] == answer(n), real.why(f"f/{n}")
    assert real.model.once_problems(sent) == [], real.model.user_texts()

    # -- the tmux server dies: every agent is lost, resumed in its own session
    live = paths[1:]
    uuids = {real.get(p)["uuid"] for p in live}
    subprocess.run(["tmux", "-S", str(real.mux.socket), "kill-server"], check=True)
    until(lambda: _resumed(home) >= uuids, 180, "every agent resumed")
    for path in live:
        real.until_status(path, "idle", timeout=300)
    for path in live:  # asked at once when idle: the resumed history is loaded by then
        name = path[2:]
        real.orcr("agent", "send", path, again(name))
        sent.append(again(name))
    for path in live:
        name = path[2:]
        real.wait_idle(path, timeout=180)
        assert real.read(path)["text"] == f"Again {name}", real.why(path)
        asked = [c for c in real.model.conversation() if again(name) in (c.prompt or "")]
        assert asked and any(prompt(name) in t for t in asked[-1].user_texts), real.why(path)
    assert real.model.once_problems(sent) == [], real.model.user_texts()

    # -- the cap and FIFO, over everything above
    promotions = fleet.replay(home.events(), CAP, {"gemini": CAP})
    assert len(promotions) == len(NAMES) + len(live)


def _resumed(home) -> set[str]:
    """Agents ``recovery.resume_lost`` put back in the queue (from the event log)."""
    return {
        e["agent"]
        for e in home.events()
        if e["kind"] == "agent.status" and e["data"]["to"] == "queued" and e["data"].get("auto")
    }
