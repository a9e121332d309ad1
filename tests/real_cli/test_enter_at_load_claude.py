"""No Enter reaches a running turn, with several real Claude Code TUIs at once (issue 40
item 3).

Under load Claude Code writes a prompt's user record to its transcript late (up to
8.7 s on a busy 2-core machine), and orcr used to press Enter again after a fixed
``prompt_confirm`` (3 s): into the running turn, or onto a permission question,
where it chose "1. Yes". Here six agents are admitted in one burst, each prompt
answered with a shell command the CLI asks permission for (permission mode
``default``). Checked, per agent: no Enter requested after its turn began (the
timestamp of the prompt's user record, or the fake Messages API's first request
for it, whichever is first), no command run (nobody answered a question), and the
question reported as the agent's blocked reason.

Planted: the fixed-time re-press (Enter again after prompt_confirm, as before) ->
fails (2026-12-06, load 20: orcr's extra Enter chose "1. Yes" on e1's permission
question, "Ran 1 shell command"; docs/providers/real-cli.md).
"""

from __future__ import annotations

import pytest
from fake_models import Script, Tool
from real_cli.enters import accepted, late, resubmits

from orcr_core.kit.testing import until
from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client

AGENTS = 6


def _prompt(name: str) -> str:
    return f"enter check {name}: run the command"


def _asked(real, key: str) -> float | None:
    """When the fake model was first asked the prompt holding ``key`` (None: not yet;
    at load 20-30 it came 40 s after orcr's Enter, 25 s after the user record)."""
    return min((r.at for r in real.model.requests if r.prompt and key in r.prompt), default=None)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_six_claude_agents_at_once_get_no_enter_after_their_turn_began(real):
    names = [f"e{i}" for i in range(1, AGENTS + 1)]
    markers = {n: real.tmp / f"ran-{n}" for n in names}
    # shorter than the default 3 s: with 6 agents Claude Code takes a prompt 1-3 s
    # after its Enter and writes it 3-4 s later still; the fixed re-press (the bug)
    # then lands between the two, as it did with 27 agents at 3 s (issue 40)
    real.timings["prompt_confirm"] = "1s"
    real.claude(
        Script({f"enter check {n}:": [Tool.bash(f"touch {markers[n]}"), "done"] for n in names})
    )
    real.idle_wait = 300
    specs = [
        dict(prompt=_prompt(n), provider="claude", path=f"e/{n}", cwd=str(real.cwd)) for n in names
    ]
    # the first alone until its pane shows (a burst into a tmux server not yet
    # started can fail one start: "tmux has-session failed: no current target")
    with Orcr(Client(real.home.socket, autostart=False)) as o:
        results = o.run_many(specs[:1])
        until(lambda: real.get("e/e1")["pane_id"], 120, "e/e1's pane")
        results += o.run_many(specs[1:])
    assert all("uuid" in r for r in results), results
    uuids = {n: r["uuid"] for n, r in zip(names, results, strict=True)}

    def settled(n: str) -> bool:  # asking, or (the bug) its question answered
        a = real.get(f"e/{n}")
        return bool(a["blocked"]) or markers[n].exists() or a["status"] != "working"

    until(lambda: all(settled(n) for n in names), 300, "every agent asking or past it")

    def delivered(uuid: str) -> bool:
        return any(e["kind"] == "prompt.applied" for e in real.home.events(uuid))

    until(lambda: all(delivered(u) for u in uuids.values()), 120, "every delivery done")
    after, decisions, timeline = {}, {}, {}
    for n in names:
        session = real.get(f"e/{n}")["agent_session"]["value"]
        # under load Claude Code writes the record seconds after the turn began
        prompt = _prompt(n)
        took = until(lambda s=session, p=prompt: accepted(real, s, p), 60, f"e/{n}'s record")
        asked = until(lambda k=f"check {n}:": _asked(real, k), 120, f"e/{n}'s prompt at the model")
        began = min(took, asked)
        events = real.home.events(uuids[n])
        enter = next(e["ts"] for e in events if e["kind"] == "prompt.enter_requested")
        applied = next(e["ts"] for e in events if e["kind"] == "prompt.applied")
        # seconds after orcr's Enter: Claude Code took the prompt, asked the model,
        # and orcr's delivery ended (the transcript showed the turn, or the look ended)
        timeline[n] = tuple(round(t - enter, 2) for t in (took, asked, applied))
        after[n] = late(events, began)
        decisions[n] = resubmits(events)
    print(f"Enters after the turn began: {after}\nresubmit decisions: {decisions}")
    print(f"accepted, model asked, delivery done (s after the Enter): {timeline}")
    ran = [n for n in names if markers[n].exists()]
    assert ran == [], (decisions, real.why(f"e/{ran[0]}"))  # orcr answered a question
    assert {n: v for n, v in after.items() if v} == {}, (after, decisions, real.why("e/e1"))
    for n in names:
        real.until_blocked(f"e/{n}", "Claude Code asks permission", timeout=60)
    assert real.model.prompts().count(_prompt("e1")) == 1
