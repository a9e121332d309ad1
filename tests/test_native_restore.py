"""herdr's own restore of an agent and orcr's resume never bring one agent back twice,
nor lose it (docs/concepts.md "One agent comes back once"; issue 21 item 7).

On herdr 0.9 orcr reports the agent's resume command (``resume_argv``); a herdr that
restores natively types it into the restored pane, and orcr re-matches that pane to
its row. A restore that did not happen, or one herdr did it its own way, ends as on
0.8: the pane closed, the agent resumed by orcr, once."""

from __future__ import annotations

import json
import signal
import sys

import pytest

from orcr_core.kit.testing import until

RESUME = (
    '[timings]\npoll_every = "50ms"\nreconcile_every = "300ms"\n[recovery]\nresume_lost = true\n'
)


def _kinds(live, uuid: str, kind: str) -> list[dict]:
    return [e["data"] for e in live.events(uuid) if e["kind"] == kind]


def _requeued(live, uuid: str) -> list[dict]:
    return [
        d for d in _kinds(live, uuid, "agent.status") if d["to"] == "queued" and d.get("resume")
    ]


def _native(live, uuid: str) -> list[dict]:
    return [d for d in _kinds(live, uuid, "agent.rematched") if d.get("native_restore")]


def _start(live, extra: str = "", env: dict | None = None) -> dict:
    live.config(live.mux.config() + RESUME + extra)
    live.start_server(extra_env=env)
    live.run("agent", "run", "-p", "echo", "--path", "n/one", "first", check=True)
    live.run("agent", "wait", "n/one", "--timeout", "30s", check=True)
    return live.get("n/one")


def _second_turn(live) -> None:
    """The agent answers a prompt in its one pane: turns are still read."""
    live.run("agent", "send", "n/one", "second", check=True)
    live.run("agent", "wait", "n/one", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "n/one", check=True).stdout == "second\n"
    assert live.mux.labels() == ["n/one"]
    assert live.status()["drift"]["orphan_agent_panes"] == 0


def _group_procs(uuid: str):
    """The agent's memory group's ``cgroup.procs`` (docs/ceilings.md), or None where
    no cgroup v1 ceilings run."""
    from orcr_core import dirs
    from orcr_core.ceilings import v1

    if v1.unusable() is not None:
        return None
    return v1.CgroupV1(dirs.instance_id()).group("memory", uuid) / "cgroup.procs"


def _reported(live, uuid: str) -> list[dict]:
    return _kinds(live, uuid, "agent.resume_reported")


@pytest.mark.parametrize("live", ["herdr", "herdr08"], indirect=True)
def test_a_native_restore_keeps_the_agent_in_its_pane_on_09_only(live):
    """0.9: orcr reports how to resume the agent, herdr types it into the restored pane
    after a cold restart, orcr re-matches the pane (one pane, no resume of its own).
    0.8: nothing is reported, the pane comes back as a shell, orcr closes it and
    resumes the agent itself, once. Restored natively, the agent is back in its
    ceilings' group (Planted: restore_argv returning argv unchanged -> fails)."""
    a = _start(live)
    emu = live.mux.emulator
    if live.mux.protocol == 22:
        until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
        argv = emu.pane(a["pane_id"]).resume_argv["argv"]
        if argv[0] != "env":  # behind the launch step that joins its ceilings
            assert argv[3].endswith("ceilings/join.py"), argv
            argv = argv[argv.index("--") + 1 :]
        assert argv[0] == "env" and f"ORCR_ID={a['uuid']}" in argv and argv[-1] == "--resume"
    else:
        assert emu.pane(a["pane_id"]).resume_argv is None
    group = _group_procs(a["uuid"])
    before = set(group.read_text().split()) if group else set()
    emu.resume_agents = True
    emu.restart()
    if live.mux.protocol == 22:
        until(lambda: _native(live, a["uuid"]), 30, what="the restored pane re-matched")
        if group:  # restored through the launch step: back in its ceilings' group
            until(lambda: set(group.read_text().split()) - before, 15, what="in its group")
        until(lambda: live.get("n/one")["status"] == "idle", 30)
        assert _requeued(live, a["uuid"]) == []  # orcr started nothing itself
        row = live.get("n/one")
        assert row["pane_id"] == a["pane_id"] and row["uuid"] == a["uuid"]
        # re-reported for the new process (herdr forgets a report across a restart)
        until(lambda: len(_reported(live, a["uuid"])) == 2, 15, what="reported again")
    else:
        until(lambda: live.get("n/one")["status"] == "idle" and _requeued(live, a["uuid"]), 60)
        assert len(_requeued(live, a["uuid"])) == 1 and _reported(live, a["uuid"]) == []
    until(lambda: live.mux.labels() == ["n/one"], 15, what="one pane")
    _second_turn(live)


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_an_agent_herdr_detects_keeps_its_status_and_orcrs_command_wins(live, tmp_path):
    """herdr detects an official agent (``claude``) in the pane: orcr attaches its
    command under herdr's own pair, so herdr's detection keeps the pane's status (the
    ``completion_seq`` witness keeps working), and after a restart the command wins
    over herdr's built-in ``claude --resume``: the same agent, re-matched."""
    script = tmp_path / "claude"  # the echo agent, under the name herdr detects
    script.write_text(
        'import runpy\nrunpy.run_module("orcr_providers.echo_agent", run_name="__main__")\n'
    )
    emu = live.mux.emulator
    emu.detect_agents = True
    a = _start(live, f'[providers.echo]\nargv = ["{sys.executable}", "{script}"]\n')
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    pane = emu.pane(a["pane_id"])
    assert pane.resume_argv["source"] == "herdr:claude" and pane.agent_authority == "detect"
    emu.set_agent_session(a["pane_id"], "s-native", agent="claude")  # built-in would resume
    emu.resume_agents = True
    emu.restart()
    until(lambda: _native(live, a["uuid"]) and live.get("n/one")["status"] == "idle", 30)
    assert _requeued(live, a["uuid"]) == []
    until(lambda: emu.pane(a["pane_id"]).agent == "claude", 15, what="detected again")
    _second_turn(live)


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_a_restore_that_does_not_happen_is_resumed_by_orcr(live):
    """Reported, but the restarted herdr does not restore agents (orcr's own server's
    setting): the pane stays a shell; after the grace orcr closes it and resumes once."""
    a = _start(live)
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    emu = live.mux.emulator
    emu.restart()
    until(lambda: live.get("n/one")["status"] == "lost", 15, what="lost while it may be restored")
    assert live.mux.labels() == ["n/one"]  # the pane is kept while the restore may come
    until(lambda: _requeued(live, a["uuid"]), 40, what="resumed by orcr after the grace")
    until(lambda: live.get("n/one")["status"] == "idle", 30)
    assert len(_requeued(live, a["uuid"])) == 1 and _native(live, a["uuid"]) == []
    until(lambda: live.mux.labels() == ["n/one"], 15, what="one pane")
    _second_turn(live)


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_a_refused_report_is_logged_and_the_agent_resumed_by_orcr(live):
    """herdr refuses a command with an apostrophe (``invalid_resume_argv``): the refusal
    is an event and a log line, the agent works on; after a restart herdr's own
    built-in resume (``claude --resume``, not the agent) is closed and orcr resumes it."""
    prefix = [sys.executable, "-X", "note=it's", "-m", "orcr_providers.echo_agent"]
    a = _start(live, "[providers.echo]\nargv = [" + ", ".join(f'"{p}"' for p in prefix) + "]\n")
    refused = until(lambda: _kinds(live, a["uuid"], "agent.resume_refused"), 15, what="refused")
    assert refused[0]["code"] == "invalid_resume_argv" and "apostrophe" in refused[0]["error"]
    assert "refused its resume command" in live.server_log()
    emu = live.mux.emulator
    assert emu.pane(a["pane_id"]).resume_argv is None  # the report was not applied
    _second_turn(live)
    seen = live.status()["monitor"]["snapshots"]
    until(lambda: live.status()["monitor"]["snapshots"] >= seen + 3, 15, what="more snapshots")
    assert len(_kinds(live, a["uuid"], "agent.resume_refused")) == 1  # asked once a process
    emu.set_agent_session(a["pane_id"], "s-native", agent="claude")  # herdr can resume it
    emu.resume_agents = True
    emu.restart()
    until(lambda: live.get("n/one")["status"] == "idle" and _requeued(live, a["uuid"]), 60)
    assert len(_requeued(live, a["uuid"])) == 1 and _native(live, a["uuid"]) == []
    # the resumed process is asked (and refused) once more
    until(lambda: len(_kinds(live, a["uuid"], "agent.resume_refused")) == 2, 15, what="again")
    until(lambda: live.mux.labels() == ["n/one"], 15, what="one pane")
    assert not any(p.pending_resume for p in emu.panes())


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_sigkill_between_the_report_and_its_record(live):
    """Killed after herdr took the command, before the row says so: the next server
    reports it again (herdr keeps one), and a restore after that is re-matched."""
    live.config(live.mux.config() + RESUME)
    live.start_server(extra_env={"ORCR_FAULT": "resume_reported"})
    live.run("agent", "run", "-p", "echo", "--path", "n/one", "first")
    assert live.proc.wait(30) == -signal.SIGKILL, live.server_log()
    live.start_server()
    live.run("agent", "wait", "n/one", "--timeout", "30s", check=True)
    a = live.get("n/one")
    until(lambda: _reported(live, a["uuid"]), 15, what="reported by the next server")
    emu = live.mux.emulator
    emu.resume_agents = True
    emu.restart()
    until(lambda: _native(live, a["uuid"]) and live.get("n/one")["status"] == "idle", 30)
    assert _requeued(live, a["uuid"]) == []
    _second_turn(live)


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
@pytest.mark.parametrize("server_up", [True, False], ids=["server_up", "server_down"])
def test_sigkill_at_the_rematch_of_a_restored_pane(live, server_up):
    """The server dies as it adopts a restored pane (herdr restarted while it ran, or
    while it was down): the next server adopts the pane; nothing is resumed twice."""
    a = _start(live, env={"ORCR_FAULT": "native_restore_seen"})
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    emu = live.mux.emulator
    emu.resume_agents = True
    if server_up:
        emu.restart()
    else:
        live.stop_server()
        emu.restart()
        live.start_server(extra_env={"ORCR_FAULT": "native_restore_seen"}, wait=False)
    assert live.proc.wait(30) == -signal.SIGKILL, live.server_log()
    live.start_server()
    until(lambda: _native(live, a["uuid"]) and live.get("n/one")["status"] == "idle", 30)
    assert _requeued(live, a["uuid"]) == [] and len(_native(live, a["uuid"])) == 1
    until(lambda: live.mux.labels() == ["n/one"], 15, what="one pane")
    _second_turn(live)


def _prompts(live, uuid: str) -> int:
    """How many prompts the echo agent took (its transcript's ``prompt`` records)."""
    p = live.path / "agents" / uuid / "echo.jsonl"
    lines = p.read_text().splitlines() if p.exists() else []
    return sum(1 for ln in lines if json.loads(ln).get("type") == "prompt")


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_a_turn_under_way_at_the_restore_is_interrupted_and_the_next_one_works(live):
    """herdr restarts mid-turn: the process running turn 2 is gone, herdr restores the
    agent in its session; orcr re-matches it `idle` with turn 2 `interrupted` (as after
    its own resume), and turn 3 is read as usual."""
    a = _start(live)
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    live.run("agent", "send", "n/one", "[sleep 120] second", check=True)
    until(lambda: _prompts(live, a["uuid"]) == 2, 30, what="turn 2 under way in the agent")
    emu = live.mux.emulator
    emu.resume_agents = True
    emu.restart()
    until(lambda: _native(live, a["uuid"]) and live.get("n/one")["status"] == "idle", 30)
    got = live.get("n/one")
    assert (got["turn"], got["turn_status"]) == (2, "interrupted"), got
    w = live.run("agent", "wait", "n/one", "--timeout", "10s")
    assert w.returncode == 7 and "turn 2 interrupted" in w.stderr, (w.stdout, w.stderr)
    assert _requeued(live, a["uuid"]) == []
    live.run("agent", "send", "n/one", "third", check=True)
    live.run("agent", "wait", "n/one", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "n/one", check=True).stdout == "third\n"
    assert live.mux.labels() == ["n/one"]


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_a_prompt_lost_before_it_reached_the_agent_sets_the_turn_back(live):
    """herdr restarts while turn 2's prompt is pasted but not yet submitted (herdr
    swallows its Enter): the restored session has one turn. The row goes back to it,
    turn 2's prompt reported as never reached, and the next prompt is turn 2 and is
    read (before, the row stayed a turn ahead of the transcript: every later turn
    waited for a turn that never came, `working` for good)."""
    a = _start(live)
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    emu = live.mux.emulator
    emu.enter_too_early, emu.enter_window = True, 3600.0  # every Enter after text is lost
    live.run("agent", "send", "n/one", "second", check=True)
    until(
        lambda: _kinds(live, a["uuid"], "prompt.enter_applied")[1:],
        30,
        what="turn 2's Enter pressed (and swallowed)",
    )
    assert _prompts(live, a["uuid"]) == 1
    emu.enter_too_early = False
    emu.resume_agents = True
    emu.restart()
    until(lambda: _native(live, a["uuid"]) and live.get("n/one")["status"] == "idle", 30)
    got = live.get("n/one")
    assert (got["turn"], got["turn_status"]) == (1, "interrupted"), got
    assert "turn 2 never reached the agent" in got["turn_error"], got
    w = live.run("agent", "wait", "n/one", "--timeout", "10s")
    assert w.returncode == 7 and "never reached" in w.stderr, (w.stdout, w.stderr)
    r = live.run("agent", "send", "n/one", "third", check=True)
    assert r.stdout.split()[2:] == ["turn", "2"], r.stdout
    live.run("agent", "wait", "n/one", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "n/one", check=True).stdout == "third\n"
    assert (live.get("n/one")["turn"], _prompts(live, a["uuid"])) == (2, 2)
    # the lost turn's delivery stopped at the loss: no Enter for it in the new session
    seqs = {e["kind"]: e["seq"] for e in live.events(a["uuid"])}  # the last of each kind
    assert seqs.get("prompt.resubmit", 0) < seqs["agent.rematched"], live.events(a["uuid"])


def _drop_checks(emu, n: int) -> None:
    """Wait until herdr 0.9.2's self-report check ran ``n`` more times, or dropped one."""
    seen = emu.drop_checks
    until(lambda: emu.drop_checks >= seen + n or emu.self_report_drops, 15, what="drop checks")


def _held_by_orcr(emu, pane_id: str) -> bool:
    from orcr_testing.herdr.model import resume_held

    pane = emu.pane(pane_id)
    return pane.agent_authority == "custom:orcr" and resume_held(pane) is not None


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_after_a_native_restore_orcr_reports_once_the_program_runs(live):
    """herdr 0.9.2 drops a self-reported agent while the pane's own shell is the
    foreground job (HERDR-0.9.md §7.2): the first report is kept (the pane's root is the
    agent's command); the restored pane's shell takes 2 s to read its rc files before
    it runs the typed command, and orcr reports again only once the agent runs there:
    kept, its command held for the next restart."""
    a = _start(live)
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    emu = live.mux.emulator
    assert emu.drop_self_reported
    _drop_checks(emu, 2)
    assert _held_by_orcr(emu, a["pane_id"])
    emu.shell = ["/bin/sh", "-c", "sleep 2; exec /bin/sh"]  # a shell slow to its prompt
    emu.resume_agents = True
    emu.restart()
    until(lambda: _native(live, a["uuid"]), 30, what="the restored pane re-matched")
    until(lambda: len(_reported(live, a["uuid"])) == 2, 15, what="reported again")
    _drop_checks(emu, 2)
    assert emu.self_report_drops == [] and _held_by_orcr(emu, a["pane_id"])
    assert _requeued(live, a["uuid"]) == []
    _second_turn(live)


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_an_agent_that_exits_in_its_restored_pane_ends(live):
    """The restored pane runs a shell and the agent is a job in it: when the agent
    exits, the pane stays at the shell's prompt. herdr drops orcr's report once the
    shell is back in front; orcr sees the agent gone and ends it ``exited``, its pane
    closed (before, the row stayed ``idle`` and the next prompt went to the shell)."""
    import psutil

    a = _start(live)
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    emu = live.mux.emulator
    emu.resume_agents = True
    emu.restart()
    until(lambda: _native(live, a["uuid"]) and live.get("n/one")["status"] == "idle", 30)
    until(lambda: len(_reported(live, a["uuid"])) == 2, 15, what="reported again")
    pane = emu.pane(a["pane_id"])
    pgid = pane.proc.foreground_pgid()
    assert pgid != pane.proc.pid  # the agent runs as a job of the restored shell
    agent = psutil.Process(pgid)
    assert agent.environ()["ORCR_ID"] == a["uuid"]
    agent.kill()
    until(lambda: emu.self_report_drops, 15, what="herdr drops orcr's report")
    until(lambda: live.get("n/one")["status"] == "ended", 15, what="the agent ended")
    got = live.get("n/one")
    assert got["exit_reason"] == "exited", got
    until(lambda: live.mux.labels() == [], 15, what="its pane closed")
    assert _requeued(live, a["uuid"]) == []


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_a_report_dropped_while_the_agent_runs_ends_nothing(live):
    """The other reading of the drop rule (docs/decisions.md): herdr takes the root
    process of orcr's own pane, the agent's program, for the pane's shell and drops
    orcr's report while the agent runs. The agent is still at the pane's root: orcr
    keeps it and its turns."""
    a = _start(live)
    until(lambda: _reported(live, a["uuid"]), 15, what="the resume command reported")
    emu = live.mux.emulator
    with emu.lock:
        emu.pane(a["pane_id"]).own_shell = True  # the other reading, for this pane
    until(lambda: emu.self_report_drops, 15, what="herdr drops orcr's report")
    seen = live.status()["monitor"]["snapshots"]

    def later() -> bool:
        return live.status()["monitor"]["snapshots"] >= seen + 3 or _ended(live)

    until(later, 15, what="more snapshots")
    assert live.get("n/one")["status"] == "idle"
    _second_turn(live)


def _ended(live) -> bool:
    return live.get("n/one")["status"] == "ended"
