"""24 Codex agents, one prompt, one folder: each follows its own thread (issue 33 item 7).

``test_codex_parallel_sessions`` once saw ``fleet/c1`` follow another agent's
thread. The cause: orcr's search for an agent's rollout matched its prompt as a
substring, and ``hello 1`` is in ``hello 10`` to ``hello 19``; the report of the
agent's own process then did not replace the wrong thread, because both rollouts
"held the prompt". Given one prompt, agents in one folder match each other's
rollouts however the prompt is compared, so the search now skips a rollout that
another live agent's process holds open, and an agent's own report wins over a
thread another agent's process holds (orcr_core/agents/sessions.py).

Every agent here gets the same prompt in the same folder, and the fake Codex
runs its two notify reports (the real thread and a stray one) at once. The fake
writes a ledger of which agent's process made which thread
(``$CODEX_HOME/fake-threads``); each agent must end following its own, and no
agent may ever have recorded another's (the event log holds every change).

Its timeouts under load (issue 33 item 15) were one agent whose prompt never
started a turn: its TUI read the paste and the Enter at once and took the Enter for
the paste's, and orcr took the composer not yet redrawn for a landed Enter
(docs/internals.md, "Reruns"; tests/test_resubmit.py reproduces it alone).

Loop (issue 33 asks for 20 runs; the result is in docs/internals.md, "Reruns"):
``for i in $(seq 20); do python -m pytest -q -n0 --reruns 0 -p no:randomly
tests/test_codex_same_prompt.py | tail -1; done``

Planted: the substring match back in ``prompt_search`` and no holder check in
``sessions._find_own`` -> fails (agents recorded others' threads; run 1 of 1).
Planted: no holder check in ``sessions._find_own`` alone -> fails (an
``agent.session`` event names another agent's thread).
Planted: ``sessions.replaces`` without the own-report rule and no ``release`` ->
the final session check fails when the search guessed wrong.
"""

from __future__ import annotations

import pytest
from fake_clis import configure

from orcr_core.kit.testing import until

AGENTS = 24
PROMPT = "hello"


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_24_codex_agents_one_prompt_one_folder_follow_their_own_threads(live, short_tmp):
    configure(
        live,
        short_tmp,
        codex=["--fake-stray-thread", "parallel"],
        timings='max_starting = "5m"\n',
    )
    with open(live.path / "config.toml", "a") as f:
        f.write(f"[concurrency]\nmax = {AGENTS}\ncodex = {AGENTS}\nmin_free_memory = 0\n")
    live.start_server()
    paths = [f"same/c{i}" for i in range(AGENTS)]
    home = short_tmp / "codex"
    with live.sdk() as o:
        for path in paths:
            o.run(PROMPT, provider="codex", path=path, cwd=str(short_tmp))
        notified, ledger = home / "fake-notified", home / "fake-threads"
        until(
            lambda: notified.is_file() and len(notified.read_text().split()) == 2 * AGENTS,
            240,
            what="every agent's two notify reports",
        )
        own = dict(line.split() for line in ledger.read_text().splitlines())
        assert len(own) == AGENTS, own
        for path in paths:
            until(lambda p=path: o.get(p)["status"] == "idle", 120, what=f"{path} idle")
        agents = {o.get(p)["uuid"]: p for p in paths}
        assert set(agents) == set(own), (agents, own)
        wrong = []
        for uuid, path in agents.items():
            a = o.get(path)
            if a["agent_session"]["value"] != own[uuid]:
                wrong.append((path, a["agent_session"]["value"], own[uuid]))
            assert o.read(path)["text"] == PROMPT
        assert not wrong, f"agents following another thread: {wrong}"
    thread_of = {t: u for u, t in own.items()}
    guesses = [
        (agents[e["agent"]], e["data"]["agent_session_value"])
        for e in live.events()
        if e["kind"] == "agent.session"
        and thread_of.get(e["data"].get("agent_session_value"), e["agent"]) != e["agent"]
    ]
    assert not guesses, f"agents that recorded another agent's thread: {guesses}"
