"""A store error in the middle of an ``agent send`` (a full disk) does not lose the
prompt's delivery, nor type it twice, nor call the turn failed.

The CI soak (random seed, a 1 s full disk) saw the send job die on the COMMIT of
``prompt.enter_applied``: the job then took the store error for a failed delivery,
could not record that either, and nothing resumed it; the turn ran, the row kept its
pending prompt and the open intents for good. Now a store error ends the job with its
steps kept, and the monitor runs the delivery again from them (``delivery.resume_cut_off``).
The fault ``disk_full@after_enter`` raises SQLite's full-disk error right after the
Enter, where the soak saw it.
"""

from __future__ import annotations

import json

from orcr_core.kit.testing import until


def _prompts(live, uuid: str) -> list[str]:
    p = live.path / "agents" / uuid / "echo.jsonl"
    rows = [json.loads(ln) for ln in p.read_text().splitlines()] if p.exists() else []
    return [r["text"] for r in rows if r.get("type") == "prompt"]


def test_a_send_cut_off_by_a_full_disk_after_its_enter_is_resumed_once(live):
    live.start_server(extra_env={"ORCR_FAULT": "disk_full@after_enter"})
    a = live.run("agent", "run", "-p", "echo", "--path", "c/one", check=True)
    uuid = a.stdout.split()[1]
    live.run("agent", "wait", "c/one", "--timeout", "30s", check=True)
    live.run("agent", "send", "c/one", "hello", check=True)
    until(
        lambda: any(e["kind"] == "prompt.applied" for e in live.events(uuid)),
        30,
        what="the cut-off delivery finished by the monitor",
    )
    live.run("agent", "wait", "c/one", "--timeout", "30s", check=True)  # not errored
    assert live.run("agent", "read", "c/one", check=True).stdout == "hello\n"
    row = live.get("c/one")
    assert (row["status"], row["turn"], row["turn_status"]) == ("idle", 1, "completed"), row
    assert _prompts(live, uuid) == ["hello"]  # typed once
    kinds = [e["kind"] for e in live.events(uuid)]
    assert "prompt.failed" not in kinds and kinds.count("prompt.paste_requested") == 1, kinds
    # the next prompt is delivered as usual: nothing was left pending
    live.run("agent", "send", "c/one", "again", check=True)
    live.run("agent", "wait", "c/one", "--timeout", "30s", check=True)
    assert _prompts(live, uuid) == ["hello", "again"]
    assert live.server_log().count("database or disk is full") >= 1
