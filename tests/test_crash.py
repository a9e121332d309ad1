"""SIGKILL the server at each step of the spawn pipeline, restart it, and check
that no agent is lost, no pane doubled, no prompt typed twice, and the event log
tells the story. Runs on real tmux and on the herdr emulator (``live`` fixture).

The fault points are orcr_core.store.faults points, inert unless ORCR_FAULT is set.
"""

from __future__ import annotations

import json
import signal

import pytest

from orcr_core.kit.testing import until as _until  # noqa: E402

#: the path differs by herdr protocol: also on herdr 0.8 (conftest.py)
pytestmark = pytest.mark.herdr_08

#: (fault point, what recovery makes of the row): the seed's rule is that a
#: starting row with no recorded pane fails (its orphan pane closed by label),
#: and a recorded pane that is still there is repaired and the pipeline resumes.
POINTS = [
    ("after_promote", "failed"),
    ("before_workspace", "failed"),
    ("before_start", "failed"),
    ("after_start", "failed"),
    ("after_pane_recorded", "idle"),
    ("before_prompt", "idle"),
    ("after_prompt", "idle"),
]
REPS = 2


def _events(home, uuid):
    return [(e["kind"], e["data"]) for e in home.events(uuid)]


def _row(home, path):
    return home.get(path)


def _prompts(home, uuid) -> int:
    p = home.path / "agents" / uuid / "echo.jsonl"
    if not p.exists():
        return 0
    return sum(1 for ln in p.read_text().splitlines() if json.loads(ln).get("type") == "prompt")


def _crash_run(live, point, path):
    live.start_server(extra_env={"ORCR_FAULT": point})
    live.run("agent", "run", "--provider", "echo", "--path", path, "hello")  # may lose the reply
    assert live.proc.wait(30) == -signal.SIGKILL, live.server_log()


def _settled(live, path):
    row = _row(live, path)
    return row if row["status"] in ("idle", "ended") else None


@pytest.mark.parametrize("point, outcome", POINTS, ids=[p for p, _ in POINTS])
def test_sigkill_at_each_pipeline_step(live, point, outcome):
    for rep in range(REPS):
        path = f"crash/{point}_{rep}"
        _crash_run(live, point, path)
        live.start_server()
        row = _until(lambda p=path: _settled(live, p), what=f"{path} to settle")
        kinds = [k for k, _ in _events(live, row["uuid"])]
        if outcome == "failed":
            assert (row["status"], row["exit_reason"]) == ("ended", "failed"), row
            assert "mid-start" in row["error"]
            assert path not in live.mux.labels()  # an orphan pane was closed, none kept
            ended = [
                d
                for k, d in _events(live, row["uuid"])
                if k == "agent.status" and d["to"] == "ended"
            ]
            assert ended and ended[0].get("repair") is True  # recovery says what it derived
        else:
            assert row["status"] == "idle", row
            assert live.run("agent", "read", path, check=True).stdout == "hello\n"
            assert live.mux.labels().count(path) == 1  # exactly one pane
            assert _prompts(live, row["uuid"]) == 1  # the prompt was typed once
            assert "agent.repaired" in kinds
        assert kinds[0] == "agent.queued"
        live.stop_server()
    # every active agent has exactly one pane, and no pane is without an active agent
    live.start_server()
    active = [a["path"] for a in json.loads(live.run("agent", "ls", "--json", check=True).stdout)]
    assert sorted(active) == live.mux.labels()


def test_sigkill_between_enter_intent_and_key_with_no_composer_drawn(live):
    """Killed after the Enter's intent was recorded but before the key, with the echo
    agent's composer not drawn (a prompt wider than the pane: its ``> `` scrolls off, so
    the provider reads no composer), the restart presses Enter once on the text shown.
    Planted: recovery pressing only when the provider has no input_state hook (ae99856
    undone: ``blind`` -> ``why == "cannot_tell"``) -> the row stays starting -> fails;
    ``resubmit.holds`` matching the prompt's head only (the composer shows its tail) ->
    fails the same way."""
    prompt = "hello " + " ".join(f"word{i}" for i in range(30))  # wider than any pane here
    live.start_server(extra_env={"ORCR_FAULT": "before_enter"})
    live.run("agent", "run", "--provider", "echo", "--path", "crash/wide", prompt)
    assert live.proc.wait(30) == -signal.SIGKILL, live.server_log()
    live.start_server()
    row = _until(lambda: _settled(live, "crash/wide"), what="crash/wide to settle")
    assert row["status"] == "idle", row
    assert live.run("agent", "read", "crash/wide", check=True).stdout == prompt + "\n"
    assert _prompts(live, row["uuid"]) == 1


def test_sigkill_several_times_in_a_row(live):
    """Killed at three successive steps of one spawn, the agent still reaches idle once."""
    path = "crash/several"
    _crash_run(live, "after_pane_recorded", path)
    for point in ("before_prompt", "after_prompt"):
        live.start_server(extra_env={"ORCR_FAULT": point})
        assert live.proc.wait(30) == -signal.SIGKILL, live.server_log()
    live.start_server()
    row = _until(lambda: _settled(live, path), what="the agent to settle")
    assert row["status"] == "idle"
    assert live.mux.labels() == [path]
    assert _prompts(live, row["uuid"]) == 1
    assert [k for k, _ in _events(live, row["uuid"])].count("agent.repaired") == 3


def test_kill_while_working_then_restart_is_lost_or_repaired(live):
    """A working agent survives a server crash: after restart it is still the same pane."""
    live.start_server()
    live.run("agent", "run", "--provider", "echo", "--path", "c/long", "[sleep 3] done", check=True)
    _until(lambda: _row(live, "c/long")["status"] == "working", what="working")
    live.kill_server()
    live.start_server()
    live.run("agent", "wait", "c/long", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "c/long", check=True).stdout == "done\n"
    assert live.mux.labels() == ["c/long"]


def test_pane_gone_while_server_down_becomes_lost_then_ended(live):
    live.start_server()
    live.run("agent", "run", "--provider", "echo", "--path", "c/gone", "hi", check=True)
    live.run("agent", "wait", "c/gone", "--timeout", "30s", check=True)
    row = _row(live, "c/gone")
    live.kill_server()
    if live.mux.kind == "tmux":
        import subprocess

        subprocess.run(
            ["tmux", "-S", str(live.mux.socket), "kill-pane", "-t", row["pane_id"]], check=True
        )
    else:
        from orcr_herdr.client import HerdrClient

        HerdrClient(str(live.mux.socket)).request("pane.close", {"pane_id": row["pane_id"]})
        _until(lambda: "c/gone" not in live.mux.labels(), what="pane gone")
    live.start_server()
    row = _until(
        lambda: (lambda r: r if r["status"] == "ended" else None)(_row(live, "c/gone")),
        what="ended",
    )
    assert row["exit_reason"] == "lost"
    kinds = [d.get("to") for k, d in _events(live, row["uuid"]) if k == "agent.status"]
    assert kinds[-2:] == ["lost", "ended"]
    # a new agent may take the path now
    live.run("agent", "run", "--provider", "echo", "--path", "c/gone", "hi", check=True)
