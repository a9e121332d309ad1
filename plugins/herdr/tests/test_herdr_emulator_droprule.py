"""herdr 0.9.2's drop of a self-reported agent in the emulator (HERDR-0.9.md §7.2, §11
item 6; :mod:`orcr_testing.herdr.droprule`): a custom report on a pane whose own shell
is the foreground job is dropped at its first check (~0.3 s) and stays dropped once a
command starts; a report made after a command started is kept until the shell is back
in front; a ``command`` pane (even a ``#!/bin/sh`` script) has no shell of its own.
0.8 has no such rule. Every message is checked against its protocol's schema."""

from __future__ import annotations

import time

import pytest
from orcr_testing.herdr.model import resume_held
from orcr_testing.herdr.wire import apply_tab, call, ok

from orcr_core.kit.testing import until

ARGV = ["orcr-agent", "--resume", "s1"]


def _report(emu, pane: str, agent: str = "orcr") -> None:
    params = {"pane_id": pane, "source": "custom:orcr", "agent": agent, "state": "working"}
    if emu.dialect.resume_argv:
        params["resume_argv"] = ARGV
    assert call(emu, "pane.report_agent", params)["result"] == {"type": "ok"}


def _agent(emu, pane: str) -> tuple[str | None, str]:
    info = ok(emu, "pane.get", {"pane_id": pane})["pane"]
    return info.get("agent"), info["agent_status"]


def _shell_pane(emu) -> str:
    return ok(emu, "workspace.create", {"cwd": "/tmp"})["root_pane"]["pane_id"]


def _foreground_is_shell(emu, pane: str) -> bool:
    info = ok(emu, "pane.process_info", {"pane_id": pane})["process_info"]
    return info.get("foreground_process_group_id") == info.get("shell_pid")


def _run(emu, pane: str, line: str) -> None:
    """Type ``line`` + Enter into the pane's shell; wait until it runs in front."""
    ok(emu, "pane.send_input", {"pane_id": pane, "text": line, "keys": ["enter"]})
    until(lambda: not _foreground_is_shell(emu, pane), 10, what=f"{line!r} in the foreground")


def _checks(emu, n: int) -> None:
    """Wait until ``n`` more drop checks ran."""
    seen = emu.drop_checks
    until(lambda: emu.drop_checks >= seen + n, 15, what=f"{n} more drop checks")


def _dropped_events(emu, pane: str) -> list[dict]:
    return [
        e["data"]
        for e in emu.retained_events()
        if e["event"] == "pane_agent_detected"
        and e["data"]["pane_id"] == pane
        and not e["data"].get("agent")
    ]


def test_a_report_on_an_idle_shell_is_dropped_at_once_and_stays_dropped(make_emulator):
    emu = make_emulator(protocol=22)
    pane = _shell_pane(emu)
    until(lambda: _foreground_is_shell(emu, pane), 10, what="the shell at its prompt")
    _report(emu, pane)
    assert emu.pane(pane).resume_argv is not None
    until(lambda: emu.self_report_drops, 10, what="the report dropped")
    assert emu.drop_checks == 1  # at the registration's check, not the periodic one
    assert emu.self_report_drops[0]["agent"] == "orcr"
    assert _agent(emu, pane) == (None, "unknown")
    assert len(_dropped_events(emu, pane)) == 1  # the label disappearing, no agent in it
    assert resume_held(emu.pane(pane)) is None  # its command goes with it
    clock = _shell_pane(emu)  # a kept report elsewhere: its checks tell the time
    _run(emu, clock, "cat")
    _report(emu, clock)
    _run(emu, pane, "sleep 30")  # the program starts: the registration does not come back
    _checks(emu, 2)
    assert _agent(emu, pane) == (None, "unknown") and _agent(emu, clock)[0] == "orcr"
    assert len(emu.self_report_drops) == 1
    assert emu.violations == []


def test_a_report_after_the_program_started_is_kept_until_the_shell_is_back(make_emulator):
    emu = make_emulator(protocol=22)
    pane = _shell_pane(emu)
    _run(emu, pane, "cat")
    _report(emu, pane)
    _checks(emu, 3)
    assert _agent(emu, pane) == ("orcr", "working") and emu.self_report_drops == []
    ok(emu, "pane.send_keys", {"pane_id": pane, "keys": ["ctrl+c"]})  # back to the prompt
    until(lambda: emu.self_report_drops, 10, what="dropped once the shell is in front")
    assert _agent(emu, pane) == (None, "unknown") and len(_dropped_events(emu, pane)) == 1
    assert emu.violations == []


@pytest.mark.parametrize(
    "program",
    ["#!/bin/sh\nwhile :; do sleep 0.2; done\n", None],
    ids=["sh_script", "bin_sh_as_command"],
)
def test_a_command_pane_has_no_shell_of_its_own(make_emulator, tmp_path, program):
    """The pane's root process is a ``command``: a ``#!/bin/sh`` script, or even an
    interactive ``/bin/sh`` given as the command, keeps its report."""
    emu = make_emulator(protocol=22)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    if program is None:
        argv = ["/bin/sh"]
    else:
        script = tmp_path / "agent.sh"
        script.write_text(program)
        script.chmod(0o755)
        argv = [str(script)]
    pane = apply_tab(emu, argv)
    until(lambda: _foreground_is_shell(emu, pane), 10, what="the command in the foreground")
    _report(emu, pane)
    _checks(emu, 3)
    assert _agent(emu, pane) == ("orcr", "working") and emu.self_report_drops == []
    assert emu.violations == []


def test_recognised_agents_and_the_rule_switched_off_are_not_dropped(make_emulator):
    """A label herdr recognises (``claude``) is no self-report; with the rule off
    (``Emulator.drop_self_reported``) nothing is checked."""
    emu = make_emulator(protocol=22)
    claude = _shell_pane(emu)
    _report(emu, claude, agent="claude")
    emu.drop_self_reported = False
    custom = _shell_pane(emu)
    _report(emu, custom)
    time.sleep(1.5)  # absence: no check runs to wait on
    assert emu.drop_checks == 0 and emu.self_report_drops == []
    assert _agent(emu, claude)[0] == "claude" and _agent(emu, custom)[0] == "orcr"
    assert emu.violations == []


def test_08_has_no_drop_rule(make_emulator):
    """herdr 0.8 keeps a report on an idle shell (the rule came with 0.9.2)."""
    emu = make_emulator(protocol=20)
    assert emu.drop_self_reported is False
    pane = _shell_pane(emu)
    until(lambda: _foreground_is_shell(emu, pane), 10, what="the shell at its prompt")
    _report(emu, pane)
    time.sleep(1.5)  # absence: 0.8 runs no check to wait on
    assert _agent(emu, pane) == ("orcr", "working") and emu.drop_checks == 0
    assert emu.violations == []
