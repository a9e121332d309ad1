"""Prompt delivery against herdr's "Enter too early" failure mode.

The emulator swallows an Enter that arrives with the text or within 300 ms of
it, and (drop_enter_probability) the first Enter after a paste at random.
orcr's two-call rule avoids the first; its confirm-and-re-press loop the second.
200 deliveries must leave no prompt unsubmitted and none submitted twice.
"""

from __future__ import annotations

import json
import threading

from orcr_core.sdk import Orcr
from orcr_core.sdk.client import Client

AGENTS, TURNS = 10, 20


def test_200_deliveries_leave_none_unsubmitted(orcr_home, short_tmp):
    from orcr_testing.herdr.emulator import Emulator

    sock = short_tmp / "herdr.sock"
    emu = Emulator(
        sock,
        short_tmp / "herdr-state",
        shell=["/bin/sh"],
        enter_too_early=True,
        drop_enter_probability=0.3,
        seed=7,
    ).start()
    try:
        orcr_home.config(
            f'[driver]\nname = "herdr"\n[herdr]\nsocket = "{sock}"\n'
            '[concurrency]\nmax = 10\n[timings]\npoll_every = "50ms"\nprompt_confirm = "400ms"\n'
        )
        orcr_home.start_server()
        errors: list = []

        def drive(i):
            try:
                with Orcr(Client(orcr_home.socket, autostart=False)) as o:
                    a = o.run(f"p{i}_0", provider="echo", path=f"d/a{i}", cwd="/")
                    o.wait(a["uuid"], timeout=60)
                    for t in range(1, TURNS):
                        o.send(a["uuid"], f"p{i}_{t}")
                        o.wait(a["uuid"], timeout=60)
                    assert o.read(a["uuid"])["text"] == f"p{i}_{TURNS - 1}"
            except Exception as exc:  # reported below
                errors.append((i, repr(exc)))

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(AGENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        if errors:
            import sqlite3

            conn = sqlite3.connect(orcr_home.path / "store.db")
            for row in conn.execute("SELECT seq, kind, data FROM event ORDER BY seq"):
                print(row)
            for p in (orcr_home.path / "agents").glob("*/echo.jsonl"):
                print(p.read_text())
            print(orcr_home.server_log())
            for pane in emu.panes():
                print(pane.pane_id, emu.screen(pane.pane_id))
                for r in emu.inputs(pane.pane_id):
                    print(r)
        assert errors == []
        swallowed = 0
        with orcr_home.sdk() as o:
            for i in range(AGENTS):
                a = o.get(f"d/a{i}")
                lines = (
                    (orcr_home.path / "agents" / a["uuid"] / "echo.jsonl").read_text().splitlines()
                )
                prompts = [
                    json.loads(ln)["text"] for ln in lines if json.loads(ln)["type"] == "prompt"
                ]
                assert prompts == [f"p{i}_{t}" for t in range(TURNS)]  # each once, in order
                swallowed += sum(r.swallowed_enters for r in emu.inputs(a["pane_id"]))
        assert swallowed > 10  # the failure mode really bit, and was recovered from
        assert [(v.kind, v.errors) for v in emu.violations] == []
    finally:
        orcr_home.stop_server()
        emu.stop()
