"""Claude Code and Codex end to end, through their real adapters, with faithful fake CLIs.

The real CLIs cannot run here, so ``tests/fakes/claude`` and ``tests/fakes/codex``
stand in: PTY TUIs that take a bracketed paste and an Enter like the real ones,
write transcripts with the record shapes of the shared fixtures (Claude Code
2.1.38, Codex 0.128.0) where the real ones do, lazily, and report their session
to herdr the way herdr's SessionStart hooks do. orcr drives them through
``plugins/claude`` and ``plugins/codex`` on real tmux and on the herdr emulator.

Claude's turn end has no marker in 2.1.38 unless a Stop hook runs (orcr installs
none), so most Claude turns here settle on the adapter's 3 s quiet period.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pytest
from fake_clis import configure, run_agent, wait_idle
from orcr_claude import ClaudeProvider
from orcr_claude.slug import project_slug

from orcr_core.contracts import LaunchSpec, SessionPointer
from orcr_core.kit.testing import until as _until  # noqa: E402

SLUG = re.compile(r"[^A-Za-z0-9]")  # TRANSCRIPTS.md section 1.1, for paths under 200 chars


def _project(tmp: Path) -> Path:
    """A cwd whose slug differs from the path in several places (``/``, ``_``, ``.``)."""
    cwd = tmp / "My_proj.v2"
    cwd.mkdir(exist_ok=True)
    return cwd


def _events(live, uuid: str) -> list[tuple[str, dict]]:
    return [(e["kind"], e["data"]) for e in live.events(uuid)]


def _event_ts(live, uuid: str, kind: str, **match) -> float:
    return next(
        e["ts"]
        for e in live.events(uuid)
        if e["kind"] == kind and match.items() <= e["data"].items()
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def _herdr_pane(live, label: str):
    return next(p for p in live.mux.emulator.panes() if p.label == label)


# --------------------------------------------------------------------------- claude


def test_claude_two_turns(live, short_tmp):
    """orcr chooses the session id, the fake writes where the adapter looks, two turns."""
    cwd = _project(short_tmp)
    configure(live, short_tmp)
    live.start_server()
    r = live.run(
        "agent", "run", "--provider", "claude", "--path", "c/one", "--cwd", str(cwd),
        "hello claude", check=True,
    )  # fmt: skip
    path, uuid = r.stdout.split()
    assert path == "c/one"
    wait_idle(live, "c/one")
    assert live.run("agent", "read", "c/one", check=True).stdout == "hello claude\n"

    r = live.run("agent", "send", "c/one", "[tool] second", check=True)
    assert "working turn 2" in r.stdout
    wait_idle(live, "c/one")
    read = json.loads(live.run("agent", "read", "c/one", "--json", check=True).stdout)
    assert (read["text"], read["turn_status"]) == ("second", "completed")

    a = live.get("c/one")
    assert a["agent_session"] == {"source": "orcr", "kind": "id", "value": uuid}
    assert (a["status"], a["turn"], a["cwd"]) == ("idle", 2, str(cwd))

    # The transcript is where Claude Code puts it and where the adapter computes it
    # (by its slug rule, and by its lookup, which globs for the id first).
    assert project_slug(str(cwd)) == SLUG.sub("-", str(cwd))
    expected = short_tmp / "claude" / "projects" / project_slug(str(cwd)) / f"{uuid}.jsonl"
    assert expected.is_file(), sorted(glob.glob(str(short_tmp / "claude" / "**"), recursive=True))
    spec = LaunchSpec(uuid, "c/one", str(cwd), "", {"home": str(short_tmp / "claude")})
    located = ClaudeProvider().locate_transcript(SessionPointer("orcr", "id", uuid), spec)
    assert located == str(expected)
    records = _lines(expected)
    prompts = [r["message"]["content"] for r in records if r["type"] == "user"]
    assert [p for p in prompts if isinstance(p, str)] == ["hello claude", "[tool] second"]
    assert {r["sessionId"] for r in records if "sessionId" in r} == {uuid}

    if live.mux.kind == "herdr":
        # The fake's SessionStart report reached herdr, as the real hook's does.
        pane = _herdr_pane(live, "c/one")
        assert pane.agent == "claude"
        assert pane.agent_session == {
            "source": "herdr:claude",
            "agent": "claude",
            "kind": "id",
            "value": uuid,
        }


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_claude_inline_subagent_lines_are_ignored(live, short_tmp):
    """Sidechain lines after the answer (a later prompt and answer of their own) do not
    count; the turn_duration line ends the turn without the quiet period."""
    # no Stop hook here: the turn_duration record alone must end the turn, and the
    # fake keeps the file growing, so the quiet period never comes
    configure(
        live,
        short_tmp,
        claude=["--fake-subagent", "--fake-turn-duration", "--fake-keep-writing"],
        claude_opts="stop_hook = false\n",
    )
    live.start_server()
    uuid = run_agent(live, "claude", "c/sub", "main answer")
    wait_idle(live, "c/sub")
    read = json.loads(live.run("agent", "read", "c/sub", "--json", check=True).stdout)
    assert (read["text"], read["turn_status"]) == ("main answer", "completed")
    transcript = Path(glob.glob(str(short_tmp / "claude" / "projects" / "*" / "*.jsonl"))[0])
    records = [r for r in _lines(transcript) if r["type"] != "last-prompt"]
    assert any(r.get("isSidechain") for r in records)
    assert records[-1].get("subtype") == "turn_duration"
    # Idle came from the marker: the file was still growing when it came
    idle_at = _event_ts(live, uuid, "agent.status", to="idle")
    _until(lambda: transcript.stat().st_mtime > idle_at + 0.5, what="the file still growing")


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_claude_unsupported_version_fails_the_agent(live, short_tmp):
    configure(live, short_tmp, claude=["--fake-version", "9.9.9"])
    live.start_server()
    run_agent(live, "claude", "v/new", "hi")
    r = live.run("agent", "wait", "v/new", "--timeout", "30s")
    assert r.returncode == 5, (r.stdout, r.stderr)
    a = live.get("v/new")
    assert (a["status"], a["exit_reason"]) == ("ended", "failed")
    assert "claude 9.9.9" in a["error"] and "allow_unpinned" in a["error"], a["error"]
    _until(lambda: live.mux.labels() == [], what="the pane to close")


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_claude_unpinned_version_allowed_runs_with_a_warning(live, short_tmp):
    configure(
        live,
        short_tmp,
        claude=["--fake-version", "9.9.9", "--fake-turn-duration"],
        claude_opts="allow_unpinned = true\n",
    )
    live.start_server()
    uuid = run_agent(live, "claude", "v/ok", "still works")
    wait_idle(live, "v/ok")
    assert live.run("agent", "read", "v/ok", check=True).stdout == "still works\n"
    # a second turn (many more monitor ticks, a new transcript version line):
    # the version is checked once, not per tick or per turn
    live.run("agent", "send", "v/ok", "again", check=True)
    wait_idle(live, "v/ok")
    assert live.run("agent", "read", "v/ok", check=True).stdout == "again\n"
    warnings = [d for k, d in _events(live, uuid) if k == "agent.warning"]
    assert len(warnings) == 1, warnings
    assert "claude 9.9.9" in warnings[0]["message"] and "allow_unpinned" in warnings[0]["message"]


# --------------------------------------------------------------------------- codex


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_codex_two_turns_on_herdr(live, short_tmp):
    """Codex picks its own thread id; it reaches orcr through herdr (the fake's hook report)."""
    cwd = _project(short_tmp)
    configure(live, short_tmp)
    live.start_server()
    run_agent(live, "codex", "x/one", "hello codex", cwd=cwd)
    wait_idle(live, "x/one")
    assert live.run("agent", "read", "x/one", check=True).stdout == "hello codex\n"

    live.run("agent", "send", "x/one", "[tool] second", check=True)
    wait_idle(live, "x/one")
    read = json.loads(live.run("agent", "read", "x/one", "--json", check=True).stdout)
    assert (read["text"], read["turn_status"]) == ("second", "completed")

    rollouts = glob.glob(
        str(short_tmp / "codex" / "sessions" / "*" / "*" / "*" / "rollout-*.jsonl")
    )
    assert len(rollouts) == 1, rollouts
    meta = _lines(Path(rollouts[0]))[0]
    thread = meta["payload"]["id"]
    assert meta["type"] == "session_meta" and meta["payload"]["cwd"] == str(cwd)
    assert rollouts[0].endswith(f"-{thread}.jsonl")
    a = live.get("x/one")
    # herdr's hook and orcr's own look for the rollout holding the prompt race to report
    # the same thread; whichever comes first names the source
    assert a["agent_session"]["source"] in ("herdr:codex", "orcr:rollout"), a["agent_session"]
    assert (a["agent_session"]["kind"], a["agent_session"]["value"]) == ("id", thread)
    assert _herdr_pane(live, "x/one").agent == "codex"


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_codex_on_tmux_learns_its_session_through_notify(live, short_tmp):
    """tmux reports no session, so orcr starts Codex with ``-c notify=[orcr internal
    codex-notify]``: after the first turn Codex hands the thread id to orcr (which
    found the rollout by the prompt already, the moment the turn started) and reads
    the turns."""
    configure(live, short_tmp)
    live.start_server()
    uuid = run_agent(live, "codex", "x/tmux", "hello")
    wait_idle(live, "x/tmux", timeout=60)
    assert live.run("agent", "read", "x/tmux", check=True).stdout == "hello\n"
    rollout = glob.glob(str(short_tmp / "codex" / "sessions" / "*" / "*" / "*" / "*.jsonl"))[0]
    a = live.get("x/tmux")
    # delivery finds the rollout by the prompt as soon as it is accepted (orcr:rollout);
    # notify then reports the same thread, which is kept
    assert a["agent_session"]["source"] in ("orcr:rollout", "orcr:codex-notify")
    assert rollout.endswith(a["agent_session"]["value"] + ".jsonl")
    live.run("agent", "send", "x/tmux", "again", check=True)
    wait_idle(live, "x/tmux", timeout=60)
    assert live.run("agent", "read", "x/tmux", check=True).stdout == "again\n"
    assert uuid


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.parametrize("stray", ["before", "after", "only"])
def test_codex_follows_the_thread_whose_rollout_has_the_prompt(live, short_tmp, stray):
    """Codex may report two thread ids in a row, one with no rollout file, or only the
    one with no rollout (its title thread, when the turn did not complete; issue 14):
    orcr follows the thread whose rollout received the agent's prompt, whatever the
    order, and reads its turns; the stray id never stays."""
    configure(live, short_tmp, codex=["--fake-stray-thread", stray])
    live.start_server()
    run_agent(live, "codex", "x/two", "hello")
    wait_idle(live, "x/two", timeout=60)
    rollouts = glob.glob(str(short_tmp / "codex" / "sessions" / "*" / "*" / "*" / "*.jsonl"))
    assert len(rollouts) == 1
    thread = _lines(Path(rollouts[0]))[0]["payload"]["id"]
    notified = short_tmp / "codex" / "fake-notified"
    per_turn = 1 if stray == "only" else 2
    _until(lambda: notified.is_file() and len(notified.read_text().split()) == per_turn)
    assert (thread in notified.read_text().split()) is (stray != "only")
    # every notify run has ended: the row follows the real thread, not the stray one
    _until(lambda: live.get("x/two")["agent_session"]["value"] == thread)
    live.run("agent", "send", "x/two", "again", check=True)
    wait_idle(live, "x/two", timeout=60)
    assert live.run("agent", "read", "x/two", check=True).stdout == "again\n"
    _until(lambda: len(notified.read_text().split()) == 2 * per_turn)
    _until(lambda: live.get("x/two")["agent_session"]["value"] == thread)
    assert live.get("x/two")["agent_session"]["value"] == thread


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_codex_on_tmux_without_notify_finds_its_thread_by_the_prompt(live, short_tmp):
    """With ``[providers.codex] notify = false`` nothing reports the thread id on tmux
    (as when Codex's first turn is interrupted: notify runs after completed turns
    only). Once delivery is done the row is ``working`` with no session; the monitor
    then finds the rollout that received the prompt in the agent's cwd and follows it."""
    other = short_tmp / "elsewhere"
    other.mkdir()
    configure(live, short_tmp, codex_opts="notify = false\n")
    live.start_server()
    # a decoy: the same prompt in another folder, which must not be taken
    run_agent(live, "codex", "x/decoy", "hello", cwd=other)
    r = live.run("agent", "run", "--provider", "codex", "--path", "x/tmux", "--cwd",
                 str(_project(short_tmp)), "hello", check=True)  # fmt: skip
    uuid = r.stdout.split()[1]
    wait_idle(live, "x/tmux", timeout=60)
    a = live.get("x/tmux")
    assert a["agent_session"]["source"] == "orcr:rollout"
    rollout = next(
        p
        for p in glob.glob(str(short_tmp / "codex" / "sessions" / "*" / "*" / "*" / "*.jsonl"))
        if p.endswith(a["agent_session"]["value"] + ".jsonl")
    )
    assert _lines(Path(rollout))[0]["payload"]["cwd"] == str(_project(short_tmp))
    assert live.run("agent", "read", "x/tmux", check=True).stdout == "hello\n"
    applied = [d for k, d in _events(live, uuid) if k == "prompt.applied"]
    assert applied and applied[0]["confirmed"] is True  # delivery found it by the prompt
    wait_idle(live, "x/decoy", timeout=60)
    assert live.get("x/decoy")["agent_session"]["value"] != a["agent_session"]["value"]


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_codex_first_prompt_is_confirmed_once_herdr_reports_the_session(live, short_tmp):
    configure(live, short_tmp)
    live.start_server()
    uuid = run_agent(live, "codex", "x/c", "hi")
    wait_idle(live, "x/c")
    kinds = _events(live, uuid)
    assert [k for k, _ in kinds if k == "prompt.resubmit"] == []
    assert [d["confirmed"] for k, d in kinds if k == "prompt.applied"] == [True]


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_claude_stop_hook_ends_turns_without_the_quiet_period(live, short_tmp):
    """orcr launches Claude with a no-op Stop hook (--settings): the stop_hook_summary
    record it makes Claude write ends each turn at once. Without it, the adapter must
    wait out its quiet period."""
    configure(live, short_tmp, claude=["--fake-keep-writing"])  # never quiet
    live.start_server()
    uuid = run_agent(live, "claude", "h/on", "with hook")
    wait_idle(live, "h/on")  # so only the hook's summary line can have ended the turn
    path = Path(glob.glob(str(short_tmp / "claude" / "projects" / "*" / f"{uuid}.jsonl"))[0])
    records = [r for r in _lines(path) if r["type"] != "last-prompt"]
    assert records[-1].get("subtype") == "stop_hook_summary"
    live.stop_server()

    configure(live, short_tmp, claude_opts="stop_hook = false\n")
    live.start_server()
    uuid = run_agent(live, "claude", "h/off", "no hook")
    wait_idle(live, "h/off")
    path = Path(glob.glob(str(short_tmp / "claude" / "projects" / "*" / f"{uuid}.jsonl"))[0])
    assert not any(r.get("subtype") == "stop_hook_summary" for r in _lines(path))
    slow = _event_ts(live, uuid, "agent.status", to="idle") - path.stat().st_mtime
    assert slow >= 2.5, slow  # the quiet period (3 s) after the last line


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_codex_is_working_once_its_rollout_shows_the_prompt_not_after_its_first_turn(
    live, short_tmp
):
    """Codex reports its thread only after a turn (notify), so a Codex agent stayed
    ``starting`` through its whole first turn while orcr pressed Enter again twice
    (issue 19 item 5). Its rollout holds the prompt as soon as it is accepted: delivery
    finds it there, and the agent is ``working`` then, as a Claude agent is."""
    configure(live, short_tmp)
    live.start_server()
    uuid = run_agent(live, "codex", "x/slow", "[sleep 6] slow first turn")
    wait_idle(live, "x/slow", timeout=60)
    kinds = _events(live, uuid)
    assert [k for k, _ in kinds if k == "prompt.resubmit"] == []
    assert [d["confirmed"] for k, d in kinds if k == "prompt.applied"] == [True]
    working = _event_ts(live, uuid, "agent.status", to="working")
    idle = _event_ts(live, uuid, "agent.status", to="idle")
    typed = _event_ts(live, uuid, "prompt.requested")
    assert idle - working > 3, (typed, working, idle)  # working during the turn, not after it
    assert live.run("agent", "read", "x/slow", check=True).stdout == "slow first turn\n"
