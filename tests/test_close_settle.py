"""A pane's close whose record was lost is settled once the pane is gone (issue 33).

``pipeline.close_pane`` writes ``pane.close_requested``, closes the pane, then writes
``pane.close_applied``. The 1-hour herdr soak (seed 2832) saw a full disk refuse that
last commit for a restored pane ``rematch.lose`` closed: the intent stayed open for
good, since only a close of the row's own pane was finished later. Here the late pane
of an ended agent (carrying its marks, as a multiplexer's restore of an old save
does) is closed by reconciliation while the store refuses the applied (``disk_full``)
or the server dies right there (SIGKILL): the close must end ``pane.close_applied``
with ``gone: true``. Planted: ``reconcile`` without ``closes.settle`` -> both fail.
"""

from __future__ import annotations

import subprocess

import pytest

from orcr_core.kit.testing import until


def _last_close(live, uuid: str) -> dict | None:
    evs = [e for e in live.events(uuid) if e["kind"].startswith("pane.close_")]
    return evs[-1] if evs else None


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
@pytest.mark.parametrize("fault", ["disk_full@before_close_applied", "before_close_applied"])
def test_a_late_panes_close_whose_record_failed_is_settled(live, fault):
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nreconcile_every = "200ms"\n')
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "c/late", "hello", check=True)
    until(lambda: live.get("c/late")["status"] == "idle", 30, what="c/late idle")
    agent = live.get("c/late")

    def tmux(*args: str) -> str:
        cmd = ["tmux", "-S", str(live.mux.socket), *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    marks = {
        o: tmux("show-options", "-p", "-t", agent["pane_id"], "-v", o)
        for o in ("@orcr_path", "@orcr_instance", "@orcr_token")
    }
    live.run("agent", "kill", "c/late", check=True)
    until(lambda: live.get("c/late")["status"] == "ended", 30, what="c/late killed")
    live.stop_server()
    live.start_server(extra_env={"ORCR_FAULT": fault})
    late = tmux("new-window", "-d", "-P", "-F", "#{pane_id}", "sleep 600")
    for option, value in marks.items():
        tmux("set-option", "-p", "-t", late, option, value)
    until(lambda: late not in tmux("list-panes", "-a", "-F", "#{pane_id}").split(), 30,
          what="the late pane closed")  # fmt: skip
    if fault == "before_close_applied":  # the server died there: the next one settles it
        until(lambda: live.proc.poll() is not None, 30, what="the server killed at the point")
        live.start_server()
    until(lambda: (_last_close(live, agent["uuid"]) or {}).get("kind") == "pane.close_applied",
          30, what="the late pane's close settled")  # fmt: skip
    last = _last_close(live, agent["uuid"])
    assert last["data"] == {"path": "c/late", "pane_id": late, "gone": True}, last
    requested = [e for e in live.events(agent["uuid"]) if e["kind"] == "pane.close_requested"]
    assert requested[-1]["data"]["pane_id"] == late and "late pane" in requested[-1]["data"]["why"]
