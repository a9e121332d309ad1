"""24 Codex agents started at once keep their own sessions (issue 19 item 3).

Under a parallel start, Codex's notify reported a second thread, one with no
rollout anywhere, while the real one's report was being recorded: the second
report had read the row before the session was set and overwrote it, so the
agent followed a thread with no transcript (``agent read`` gave ``text: null``).
The fake Codex here runs both notify programs at once (``--fake-stray-thread
parallel``) for every turn; each agent must end up following its own rollout.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest
from fake_clis import configure

from orcr_core.kit.testing import until

AGENTS = 24


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_24_codex_agents_started_at_once_keep_their_own_sessions(live, short_tmp):
    configure(
        live,
        short_tmp,
        codex=["--fake-stray-thread", "parallel"],
        timings='max_starting = "5m"\n',
    )
    with open(live.path / "config.toml", "a") as f:
        f.write(f"[concurrency]\nmax = {AGENTS}\ncodex = {AGENTS}\nmin_free_memory = 0\n")
    live.start_server()
    paths = [f"fleet/c{i}" for i in range(AGENTS)]
    with live.sdk() as o:
        for i, path in enumerate(paths):
            o.run(f"hello {i}", provider="codex", path=path, cwd=str(short_tmp))
        notified = short_tmp / "codex" / "fake-notified"
        # every turn ended and both of its notify runs have ended
        until(
            lambda: notified.is_file() and len(notified.read_text().split()) == 2 * AGENTS,
            240,
            what="every agent's two notify reports",
        )
        threads = {}
        for f in glob.glob(str(short_tmp / "codex" / "sessions" / "*" / "*" / "*" / "*.jsonl")):
            lines = [json.loads(ln) for ln in Path(f).read_text().splitlines()]
            prompt = next(
                ln["payload"]["message"]
                for ln in lines
                if ln["payload"].get("type") == "user_message"
            )
            threads[prompt] = lines[0]["payload"]["id"]
        assert len(threads) == AGENTS
        for i, path in enumerate(paths):
            until(lambda p=path: o.get(p)["status"] == "idle", 120, what=f"{path} idle")
            a = o.get(path)
            assert a["agent_session"]["value"] == threads[f"hello {i}"], (path, a)
            assert o.read(path)["text"] == f"hello {i}"
