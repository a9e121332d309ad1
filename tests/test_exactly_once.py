"""Each first prompt reaches the model exactly once, across a SIGKILL of the server at
every point of its delivery (issue 19 item 1), on tmux and on the herdr emulator.

The fake Claude Code and Codex CLIs (tests/fakes) send every turn's conversation to
the fake model APIs (tests/fake_models), which record each request's user texts: the
assertion is made where the model sees it. A prompt pasted twice into one composer
(killed between the paste and Enter, then pasted again) shows doubled in one user
text; one typed again after its Enter (the turn not yet visible to orcr: Codex's
session is learnt only after the turn) shows as a second user message.
"""

from __future__ import annotations

import signal
import sqlite3

import pytest
from fake_clis import configure, wait_idle
from fake_models import anthropic_server, responses_server

from orcr_core.kit.testing import until

#: every point of the first prompt's delivery, in order
POINTS = [
    "before_prompt",
    "before_paste",
    "after_paste",
    "before_enter",
    "after_enter",
    "after_prompt",
]


@pytest.fixture
def apis():
    with anthropic_server() as claude, responses_server() as codex:
        yield {"claude": claude, "codex": codex}


def _configure(live, tmp, apis, claude=(), **kw):
    configure(
        live,
        tmp,
        claude=["--fake-api", apis["claude"].url, *claude],
        codex=["--fake-api", apis["codex"].url + "/v1"],
        **kw,
    )


def _read(live, path):
    return live.run("agent", "read", path, check=True).stdout


@pytest.mark.parametrize("provider", ["claude", "codex"])
def test_a_prompt_reaches_the_model_once_without_a_crash(live, short_tmp, apis, provider):
    _configure(live, short_tmp, apis)
    live.start_server()
    live.run("agent", "run", "-p", provider, "--path", "o/a", "hello once", check=True)
    wait_idle(live, "o/a", timeout=60)
    assert _read(live, "o/a") == "hello once\n"
    assert apis[provider].once_problems(["hello once"]) == []


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("provider", ["claude", "codex"])
def test_sigkill_at_each_delivery_point_sends_the_prompt_once(
    live, short_tmp, apis, provider, point
):
    _configure(live, short_tmp, apis)
    live.start_server(extra_env={"ORCR_FAULT": point})
    # killed after the Enter, the turn still runs at the restart (Codex has not reported
    # its thread: only its rollout shows the prompt)
    prompt = f"[sleep {4 if point == 'after_enter' else 1}] crash at {point}"
    live.run("agent", "run", "-p", provider, "--path", "o/k", prompt)  # may lose the reply
    assert live.proc.wait(60) == -signal.SIGKILL, live.server_log()
    live.start_server()
    wait_idle(live, "o/k", timeout=60)
    assert _read(live, "o/k") == f"crash at {point}\n"
    assert apis[provider].once_problems([prompt]) == [], apis[provider].user_texts()
    assert live.mux.labels() == ["o/k"]
    if point == "after_enter":  # the turn was found (Codex: its rollout), nothing pressed
        events = live.events(live.get("o/k")["uuid"])
        applied = [e["data"]["confirmed"] for e in events if e["kind"] == "prompt.applied"]
        assert applied == [True]
        assert "prompt.resubmit" not in [e["kind"] for e in events]


def test_a_paste_the_tui_draws_late_is_not_pasted_again(live, short_tmp, apis):
    """Claude Code 2.1 draws a paste up to ~1.4 s after it arrives: killed right after
    the paste, a restart that finds the composer still empty must wait for it rather
    than paste again (the two pastes would join into one doubled message)."""
    _configure(live, short_tmp, apis, claude=["--fake-paste-delay", "3"])
    live.start_server(extra_env={"ORCR_FAULT": "after_paste"})
    prompt = "drawn late"
    live.run("agent", "run", "-p", "claude", "--path", "o/late", prompt)
    assert live.proc.wait(60) == -signal.SIGKILL, live.server_log()
    live.start_server()
    wait_idle(live, "o/late", timeout=60)
    assert _read(live, "o/late") == "drawn late\n"
    assert apis["claude"].once_problems([prompt]) == [], apis["claude"].user_texts()


@pytest.mark.parametrize("point", ["after_paste", "after_enter"])
def test_sigkill_in_a_start_burst_of_8_sends_each_prompt_once(live, short_tmp, apis, point):
    """4 Claude and 4 Codex agents started at once; the server dies at the 4th time
    any of them reaches ``point``, with the others anywhere in their delivery."""
    _configure(live, short_tmp, apis)
    live.start_server(extra_env={"ORCR_FAULT": f"{point}:4"})
    agents = {
        f"b/{p}{i}": (p, f"[sleep 2] burst {p} {i}") for p in ("claude", "codex") for i in range(4)
    }
    try:
        with live.sdk() as o:
            for path, (provider, prompt) in agents.items():
                o.run(prompt, provider=provider, path=path)
    except Exception:
        pass  # the server may die under the burst
    assert live.proc.wait(60) == -signal.SIGKILL, live.server_log()
    live.start_server()
    typed = {"claude": [], "codex": []}
    for path, (provider, prompt) in agents.items():
        row = until(lambda p=path: (a := live.get(p))["status"] in ("idle", "ended") and a, 90)
        if row["status"] == "ended":  # no pane recorded yet: failed, its prompt never typed
            # (once, b/codex0 ended otherwise; its error and steps name why: RERUN REASON)
            why = [row["exit_reason"], row["error"], [e["kind"] for e in live.events(row["uuid"])]]
            assert row["exit_reason"] == "failed" and "mid-start" in (row["error"] or ""), why
            assert apis[provider].received(prompt) == [], path
            continue
        assert _read(live, path) == prompt.split("] ", 1)[1] + "\n", path
        typed[provider].append(prompt)
    assert len(typed["claude"] + typed["codex"]) >= 4  # the 4 that reached the point
    for provider, prompts in typed.items():
        assert apis[provider].once_problems(prompts) == [], apis[provider].user_texts()
    alive = sorted(p for p in agents if live.get(p)["status"] == "idle")
    assert live.mux.labels() == alive


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("provider", ["claude", "codex"])
def test_sigkill_at_each_point_of_an_agent_send_sends_it_once(
    live, short_tmp, apis, provider, point
):
    """``agent send`` (turn 2) rides the first prompt's steps: its text is in the row
    before anything is typed, and a restart resumes its delivery from them."""
    _configure(live, short_tmp, apis)
    live.start_server(extra_env={"ORCR_FAULT": f"{point}:2"})  # the 1st is turn 1's
    first = "first turn"
    live.run("agent", "run", "-p", provider, "--path", "o/s", first, check=True)
    wait_idle(live, "o/s", timeout=60)
    prompt = f"[sleep {4 if point == 'after_enter' else 1}] send crash at {point}"
    live.run("agent", "send", "o/s", prompt)  # the server may die before it answers
    assert live.proc.wait(60) == -signal.SIGKILL, live.server_log()
    with sqlite3.connect(live.path / "store.db") as conn:  # as the crash left it
        row = conn.execute("SELECT status, pending_prompt FROM agent WHERE path = 'o/s'").fetchone()
    assert row == ("working", prompt)  # the text was in the row before any typing
    live.start_server()
    wait_idle(live, "o/s", timeout=60)
    row = live.get("o/s")
    assert row["turn"] == 2, row
    assert _read(live, "o/s") == f"send crash at {point}\n"
    assert apis[provider].once_problems([first, prompt]) == [], apis[provider].user_texts()
    assert live.mux.labels() == ["o/s"]
    events = live.events(row["uuid"])
    applied = [e["data"] for e in events if e["kind"] == "prompt.applied"]
    assert [a["turn"] for a in applied] == [1, 2]
    if point == "after_enter":  # the turn was found running: nothing pressed again
        assert applied[-1]["confirmed"] is True
        assert "prompt.resubmit" not in [e["kind"] for e in events]
