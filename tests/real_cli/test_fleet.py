"""The fleet tier: real Claude Code and Codex TUIs at once, through orcr's hard cases.

One scenario, on tmux (issue 19): 5 Claude Code and 5 Codex agents admitted in one
burst under caps 8 / claude 4 / codex 4 (8 TUIs live at once), the server SIGKILLed
while their first prompts are being delivered and started again at once; two agents
killed so the two queued ones are promoted; the tmux server killed with
``recovery.resume_lost`` on, every agent resumed in its own session and asked again;
then the memory floor set just above what two more TUIs take, four admitted, and
only what the headroom covers promoted until it is lowered. Checked: every answer,
each prompt received by the model exactly once (the fake APIs' records of what the
model was sent), the caps and per-provider FIFO order (the event log).

Figures (RSS per TUI, server CPU during the burst) are printed, and written to
``$ORCR_FLEET_FIGURES`` when set: ``ORCR_FLEET_FIGURES=/tmp/fleet.json
scripts/provider-smoke all -- -k fleet -s`` reruns them (docs/providers/real-cli.md).
"""

from __future__ import annotations

import subprocess
import time

import pytest
from fake_models import Script, Text
from real_cli import fleet
from real_cli.fleet import CLAUDE, CODEX

from orcr_core.kit.testing import until
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client

CAP, PER = 8, 4
NAMES = {CLAUDE: [f"c{i:02d}" for i in range(1, 6)], CODEX: [f"x{i:02d}" for i in range(1, 6)]}
MORE = {CLAUDE: ["c06", "c07"], CODEX: ["x06", "x07"]}  # the memory-floor round


def prompt(name: str) -> str:
    return f"fleet task {name}: say your answer"


def again(name: str) -> str:
    return f"fleet again {name}: after the restart"


def answer(name: str) -> str:
    return f"Answer for {name}"


def _script(names: list[str]) -> Script:
    turns = {}
    for n in names:
        # streamed over about a second: turns overlap the crash and each other
        turns[f"fleet task {n}:"] = Text(answer(n), delay=0.1, chunk=3)
        turns[f"fleet again {n}:"] = f"Again {n}"
    return Script(turns)


def _paths(provider: str, names=None) -> list[str]:
    return [f"f/{n}" for n in (names or NAMES[provider])]


def _exactly_once(f: fleet.Fleet, sent: dict[str, list[str]], problems: set[str]) -> None:
    """Each prompt sent so far reached its model exactly once (the fake's record);
    what does not is collected, and asserted at the end so the scenario runs whole."""
    for provider, prompts in sent.items():
        problems.update(f"{provider}: {p}" for p in f.model(provider).once_problems(prompts))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_fleet_of_claude_and_codex_through_bursts_crashes_and_the_memory_floor(real):
    real.timings.update(prompt_confirm="3s", max_starting="3m")
    f = fleet.start(
        real,
        _script(NAMES[CLAUDE] + MORE[CLAUDE]),
        _script(NAMES[CODEX] + MORE[CODEX]),
        extra=f"[concurrency]\nmax = {CAP}\nclaude = {PER}\ncodex = {PER}\n"
        'min_free_memory = "1MiB"\n[recovery]\nresume_lost = true\n',
    )
    home = real.home
    figures = fleet.Figures(home.proc.pid)
    sent: dict[str, list[str]] = {CLAUDE: [], CODEX: []}
    problems: set[str] = set()  # prompts not received exactly once

    figures.phase("burst")
    # -- a burst of 10 at once; the server SIGKILLed mid-delivery and started again
    order = [p for pair in zip(NAMES[CLAUDE], NAMES[CODEX], strict=True) for p in pair]
    specs = [
        dict(prompt=prompt(n), provider=CLAUDE if n[0] == "c" else CODEX, path=f"f/{n}",
             cwd=str(real.cwd))
        for n in order
    ]  # fmt: skip
    figures.burst_begins()
    with Orcr(Client(home.socket, autostart=False)) as o:
        results = o.run_many(specs)
    assert all("uuid" in r for r in results), results
    for s in specs:
        sent[s["provider"]].append(s["prompt"])
    try:
        until(
            lambda: sum(e["kind"] == "prompt.requested" for e in home.events()) >= 3,
            120,
            "three first prompts being typed",
        )
    except AssertionError as exc:
        log = (home.path / "server.out").read_text()[:8000]
        raise AssertionError(f"{exc}\n{log}\n{real.why('f/x01')}") from None
    figures.burst_ends("burst_until_the_kill")
    home.kill_server()
    home.start_server()
    figures.server_pid = home.proc.pid
    figures.burst_begins()
    live = [p for prov in (CLAUDE, CODEX) for p in _paths(prov)[:PER]]
    for path in live:
        real.wait_idle(path, timeout=180)
    figures.burst_ends("burst_after_restart")
    figures.tuis(real, {prov: _paths(prov)[:PER] for prov in (CLAUDE, CODEX)})
    status = home.status()
    assert status["live"] == CAP and status["queue_depth"] == 2, status

    figures.phase("kill_and_promote")
    # -- two killed: the queued fifth of each provider is promoted in its place
    real.orcr("agent", "kill", "f/c01")
    real.orcr("agent", "kill", "f/x01")
    for path in ("f/c05", "f/x05"):
        real.wait_idle(path, timeout=180)
    for prov in (CLAUDE, CODEX):
        for name in NAMES[prov]:
            if name.endswith("01"):
                continue
            assert real.read(f"f/{name}")["text"] == answer(name), real.why(f"f/{name}")
    _exactly_once(f, sent, problems)

    figures.phase("tmux_kill_resume")
    # -- the tmux server dies: every agent is lost, resumed in its own session
    sessions = {p: real.get(p)["agent_session"]["value"] for p in _live_paths(real)}
    assert len(sessions) == CAP
    subprocess.run(["tmux", "-S", str(real.mux.socket), "kill-server"], check=True)
    uuids = {real.get(p)["uuid"] for p in sessions}
    until(lambda: _resumed(home) >= uuids, 120, "every agent resumed")
    for path in sessions:
        real.until_status(path, "idle", timeout=180)
        assert real.get(path)["agent_session"]["value"] == sessions[path], real.why(path)
    for path in ("f/c02", "f/x02"):
        name = path[2:]
        real.orcr("agent", "send", path, again(name))
        sent[CLAUDE if name[0] == "c" else CODEX].append(again(name))
        real.wait_idle(path, timeout=120)
        assert real.read(path)["text"] == f"Again {name}", real.why(path)
        last = f.model(CLAUDE if name[0] == "c" else CODEX).conversation()[-1]
        assert any(prompt(name) in t for t in last.user_texts), "the conversation was kept"
    _exactly_once(f, sent, problems)

    figures.phase("memory_floor")
    # -- the memory floor: room for about two more TUIs, four admitted
    # each provider's footprint is learnt from its live, loaded TUIs (kept once they end)
    mem = until(
        lambda: all((m := home.status()["memory"])["estimates"][p]["learnt_from"] for p in (CLAUDE, CODEX)) and m,
        60,
        "footprints learnt from the live TUIs",
    )  # fmt: skip
    est = {p: mem["estimates"][p]["bytes"] for p in (CLAUDE, CODEX)}
    for path in sessions:
        real.orcr("agent", "kill", path)
    until(lambda: not real.mux.labels(), 60, "every pane closed")
    avail = until(lambda: _settled(home), 60, "available memory settled after the kills")
    floor = avail - est[CLAUDE] - est[CODEX] - est[CLAUDE] // 2
    real.orcr("config", "set", "concurrency.min_free_memory", f"{max(floor, 2**20)}B")
    more = [n for pair in zip(MORE[CLAUDE], MORE[CODEX], strict=True) for n in pair]
    with Orcr(Client(home.socket, autostart=False)) as o:  # one burst, as in the issue
        burst = o.run_many(
            [dict(prompt=prompt(n), provider=CLAUDE if n[0] == "c" else CODEX, path=f"f/{n}",
                  cwd=str(real.cwd)) for n in more]
        )  # fmt: skip
    for n in more:
        sent[CLAUDE if n[0] == "c" else CODEX].append(prompt(n))

    def promoted() -> int:
        started = {
            e["agent"]
            for e in home.events()
            if e["kind"] == "agent.status" and e["data"]["to"] == "starting"
        }
        return sum(r["uuid"] in started for r in burst)

    def held_and_listed() -> dict | None:
        """The server's hold, seen by ``agent ls`` while it lasts: available memory moves
        with other jobs, so a hold can lift between two separate readings."""
        if promoted() == len(more):
            return {"memory": {"reserved": 0}}
        s = home.status()
        if s["held"] and "memory" in s["held"]:
            if "queued (held: memory)" in real.orcr("agent", "ls").stdout:
                return s
        return None

    held = until(held_and_listed, 60, "held: memory, and agent ls saying so")
    # the headroom covers about two: never the whole burst (other jobs' memory moves it)
    assert promoted() < len(more), (promoted(), avail - floor, held)
    figures.data["memory_floor"] = {
        "estimates_mib": {p: round(b / 2**20) for p, b in est.items()},
        "headroom_mib": round((avail - floor) / 2**20),
        "promoted_of_4": promoted(),
        "reserved_mib": round(held["memory"]["reserved"] / 2**20),
    }
    real.orcr("config", "set", "concurrency.min_free_memory", "0")
    for n in more:
        real.wait_idle(f"f/{n}", timeout=180)
        assert real.read(f"f/{n}")["text"] == answer(n), real.why(f"f/{n}")
    _exactly_once(f, sent, problems)

    figures.phase("replay")
    # -- the caps and per-provider FIFO, over everything above
    promotions = fleet.replay(home.events(), CAP, {CLAUDE: PER, CODEX: PER})
    assert len(promotions) == len(order) + CAP + len(more)
    figures.save()
    assert sorted(problems) == [], (f.claude.user_texts(), f.codex.user_texts())


def _live_paths(real) -> list[str]:
    with Orcr(Client(real.home.socket, autostart=False)) as o:
        return [a["path"] for a in o.list() if a["status"] in ("idle", "working")]


_last_available: list[int] = []


def _settled(home) -> int | None:
    """Available memory once two readings a second apart differ by under 32 MiB."""
    now = home.status()["memory"]["available"]
    before = _last_available[-1] if _last_available else None
    _last_available.append(now)
    if before is not None and abs(now - before) < 32 * 2**20:
        return now
    time.sleep(1)
    return None


def _resumed(home) -> set[str]:
    """Agents ``recovery.resume_lost`` put back in the queue (from the event log)."""
    return {
        e["agent"]
        for e in home.events()
        if e["kind"] == "agent.status" and e["data"]["to"] == "queued" and e["data"].get("auto")
    }
