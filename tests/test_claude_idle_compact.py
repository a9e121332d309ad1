"""Claude Code 2.1.299+ compacts a conversation left idle (issue 20 item 33c).

The fake Claude Code appends what 2.1.332 writes then (``--fake-idle-compact SECS``:
a ``compact_boundary``, an ``isCompactSummary`` user line, an ``attachment``, a
``system/informational`` notice, no prompt; plugins/claude/tests/fixtures/
orcr-2.1.332-idle-compact.jsonl says where the shapes come from). An idle agent stays
idle through it: no turn, no ``working``, its ``idle_since`` (the GC and parking
clocks) unchanged; the prompt sent after it is turn 2.
"""

from __future__ import annotations

import glob
import json
import time
from pathlib import Path

import pytest
from fake_clis import configure, run_agent, wait_idle

from orcr_core.kit.testing import until


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.parametrize("hook", [True, False], ids=["stop-hook", "no-stop-hook"])
def test_idle_compaction_keeps_the_agent_idle_and_the_next_prompt_is_turn_2(live, short_tmp, hook):
    configure(
        live,
        short_tmp,
        claude=["--fake-idle-compact", "1"],
        claude_opts="" if hook else "stop_hook = false\n",
    )
    live.start_server()
    uuid = run_agent(live, "claude", "ic/a", "first answer")
    wait_idle(live, "ic/a")
    before = live.get("ic/a")
    assert (before["status"], before["turn"]) == ("idle", 1)
    path = Path(glob.glob(str(short_tmp / "claude" / "projects" / "*" / f"{uuid}.jsonl"))[0])

    def compacted():
        return any(r.get("subtype") == "informational" for r in _lines(path))

    until(compacted, timeout=30, what="the fake's idle compaction")
    # The server polls every 50 ms: give it 40 polls to (wrongly) see a turn in it
    time.sleep(2)
    after = live.get("ic/a")
    assert (after["status"], after["turn"], after["idle_since"]) == (
        "idle",
        1,
        before["idle_since"],
    )
    read = json.loads(live.run("agent", "read", "ic/a", "--json", check=True).stdout)
    assert (read["text"], read["turn_status"]) == ("first answer", "completed")

    live.run("agent", "send", "ic/a", "second answer", check=True)
    wait_idle(live, "ic/a")
    read = json.loads(live.run("agent", "read", "ic/a", "--json", check=True).stdout)
    assert (read["turn"], read["text"], read["turn_status"]) == (2, "second answer", "completed")
    moves = [
        (e["data"]["from"], e["data"]["to"])
        for e in live.events(uuid)
        if e["kind"] == "agent.status"
    ]
    assert moves[-4:] == [
        ("starting", "working"),
        ("working", "idle"),
        ("idle", "working"),
        ("working", "idle"),
    ], moves


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
