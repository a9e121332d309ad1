"""herdr 0.9.2 drops a self-reported agent while the pane's own shell is the foreground
job (HERDR-0.9.md §7.2; the emulator's rule: orcr_testing.herdr.droprule). orcr starts
each agent as its pane's ``command`` (no shell): a ``command`` agent whose program is a
``#!/bin/sh`` script reporting itself to herdr, as Crush or Autohand do, keeps its
report, and orcr follows the turns it reports. orcr's own report after a native restore:
tests/test_native_restore.py."""

from __future__ import annotations

import sys

import pytest

from orcr_core.kit.testing import until

#: a self-reporting agent written in sh: it reports itself working, then idle, to the
#: herdr of its pane (herdr's CLI would do the same; python is only the socket client)
SCRIPT = """#!/bin/sh
report() {
  "{python}" -c 'import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["HERDR_SOCKET_PATH"])
p = {"pane_id": os.environ["HERDR_PANE_ID"], "source": "custom:shloop", "agent": "shloop",
     "state": sys.argv[1]}
s.sendall((json.dumps({"id": "r", "method": "pane.report_agent", "params": p}) + "\\n").encode())
s.recv(4096)' "$1"
}
report working
while [ ! -e "{go}" ]; do sleep 0.1; done  # until orcr has seen it working
report idle
while :; do sleep 0.2; done
"""


def _statuses(live, uuid: str) -> list[str]:
    return [e["data"]["to"] for e in live.events(uuid) if e["kind"] == "agent.status"]


@pytest.mark.parametrize("live", ["herdr"], indirect=True)
def test_a_command_agent_written_in_sh_keeps_its_self_report(live, tmp_path):
    script = tmp_path / "shloop"
    go = tmp_path / "go"
    script.write_text(SCRIPT.replace("{python}", sys.executable).replace("{go}", str(go)))
    script.chmod(0o755)
    live.start_server()
    emu = live.mux.emulator
    assert emu.drop_self_reported
    live.run("agent", "run", "-p", "command", "--path", "c/sh", "--", str(script), check=True)
    a = until(lambda: (lambda a: a if a["pane_id"] else None)(live.get("c/sh")), 30)
    until(lambda: emu.pane(a["pane_id"]).agent == "shloop", 15, what="the script's report")
    # it stays working until orcr has seen it (a fixed 1 s was once too short under load)
    until(lambda: "working" in _statuses(live, a["uuid"]), 30, what="working, as reported")
    go.touch()
    until(lambda: "idle" in _statuses(live, a["uuid"]), 30, what="idle, as reported")
    seen = emu.drop_checks
    until(lambda: emu.drop_checks >= seen + 2 or emu.self_report_drops, 15, what="checks")
    assert emu.self_report_drops == []
    pane = emu.pane(a["pane_id"])
    assert (pane.agent, pane.agent_status, pane.own_shell) == ("shloop", "idle", False)
    assert live.get("c/sh")["status"] == "idle"
