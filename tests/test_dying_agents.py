"""Agents whose programs are missing or die at every moment of the start and
prompt path, beside a fleet of healthy echo agents: each dying agent ends with
the reason, and the multiplexer and every other agent live on (issue 8, item 1:
tmux 3.3a's whole server crashed on a paste into a dead pane).

Runs on real tmux and on the herdr emulator (``live`` fixture).
"""

from __future__ import annotations

import os
import subprocess
import sys

from orcr_core.kit.testing import until

#: exits as soon as any byte arrives: the paste of its prompt kills it before Enter
DIES_ON_INPUT = (
    "import os, sys, tty\ntty.setraw(0)\nos.write(1, b'ready\\r\\n')\n"
    "os.read(0, 1)\nos.write(1, b'bye\\r\\n')\nsys.exit(4)\n"
)
ECHOES = ("f/e1", "f/e2", "f/e3", "f/e4")


def _path_without_agent_clis() -> str:
    """orcr's PATH minus any directory holding a claude or codex binary."""
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.access(os.path.join(d, n), os.X_OK) for n in ("claude", "codex"))
    ]
    return os.pathsep.join(keep)


def _mux_answers(home) -> bool:
    mux = home.mux
    if mux.kind == "tmux":
        res = subprocess.run(
            ["tmux", "-S", str(mux.socket), "list-sessions"], capture_output=True, text=True
        )
        return res.returncode == 0
    return mux.emulator.panes() is not None and home.get(ECHOES[0]) is not None


def _until_idle(live, path: str) -> None:
    """Wait up to 30 s for ``path`` to be idle; a failure names its row and its events."""
    row: dict = {}

    def idle() -> bool:
        row.update(live.get(path))
        return row["status"] == "idle"

    try:
        until(idle, 30, what=f"{path} to be idle")
    except AssertionError as exc:
        seen = [(e["ts"], e["kind"], e["data"]) for e in live.events(row["uuid"])]
        raise AssertionError(f"{exc}: row {row}, events {seen}") from None


def test_dying_programs_never_take_the_fleet_down(live):
    live.start_server(extra_env={"PATH": _path_without_agent_clis()})
    run = live.run
    for path in ECHOES:
        run("agent", "run", "-p", "echo", "--path", path, f"[sleep 1] {path}", check=True)
    # missing programs: known only at start, each ends failed with the reason
    run("agent", "run", "-p", "claude", "--path", "d/claude", "hi", check=True)
    run("agent", "run", "-p", "codex", "--path", "d/codex", "hi", check=True)
    run("agent", "run", "-p", "command", "--path", "d/missing", "--prompt", "hi",
        "--", "no-such-program-orcr", "x", check=True)  # fmt: skip
    # dies before its prompt is pasted
    run("agent", "run", "-p", "command", "--path", "d/exit", "--prompt", "hi",
        "--", "sh", "-c", "exit 3", check=True)  # fmt: skip
    # dies between the paste of its first prompt and Enter
    run("agent", "run", "-p", "command", "--path", "d/between", "--prompt", "hi",
        "--", sys.executable, "-c", DIES_ON_INPUT, check=True)  # fmt: skip
    # idle with no prompt; dies during an ``agent send``, between paste and Enter
    run("agent", "run", "-p", "command", "--path", "d/send",
        "--", sys.executable, "-c", DIES_ON_INPUT, check=True)  # fmt: skip

    for path, error in (
        ("d/claude", "claude: command not found"),
        ("d/codex", "codex: command not found"),
        ("d/missing", "no-such-program-orcr: command not found"),
    ):
        a = live.ended(path)
        assert (a["exit_reason"], a["error"]) == ("failed", error), a
    a = live.ended("d/exit")
    assert a["exit_reason"] == "failed" and "exited" in a["error"], a
    a = live.ended("d/between")
    assert a["exit_reason"] in ("failed", "exited"), a

    _until_idle(live, "d/send")
    run("agent", "send", "d/send", "hello", check=True)
    assert live.ended("d/send")["exit_reason"] == "exited"

    # the multiplexer and every echo agent live on, and still take prompts
    assert _mux_answers(live)
    for path in ECHOES:
        run("agent", "wait", path, "--timeout", "30s", check=True)
        assert run("agent", "read", path, check=True).stdout == f"{path}\n"
        run("agent", "send", path, "again", check=True)
    for path in ECHOES:
        run("agent", "wait", path, "--timeout", "30s", check=True)
        assert run("agent", "read", path, check=True).stdout == "again\n"
        assert live.get(path)["status"] == "idle"
    # no healthy agent was ever lost, however briefly
    for path in ECHOES:
        statuses = [e["data"]["to"] for e in live.events(live.get(path)["uuid"])
                    if e["kind"] == "agent.status"]  # fmt: skip
        assert statuses == ["starting", "working", "idle", "working", "idle"], (path, statuses)
    assert sorted(live.mux.labels()) == sorted(ECHOES)
