"""herdr 0.9.2's ``resume_argv`` in the emulator (HERDR-0.9.md §8.2, §11 item 5): checked
when reported (``invalid_resume_argv``, ``resume_not_accepted``), kept while its
reporter holds the pane, saved with the session and typed into the restored pane on a
cold restart ahead of herdr's built-in resume; 0.8 ignores the field (its schema has
none). Every message is checked against its protocol's schema."""

from __future__ import annotations

import pytest
from orcr_testing.herdr.wire import LINE_AGENT, apply_tab, call, ok

from orcr_core.kit.testing import until

ARGV = ["sh", "-c", "echo RESUMED-$0; exec cat", "s1"]


def _report(emu, pane, argv=ARGV, method="pane.report_agent", **extra):
    params = {"pane_id": pane, "source": "custom:orcr", "agent": "orcr", "resume_argv": argv}
    if method == "pane.report_agent":
        params["state"] = "idle"
    return call(emu, method, {**params, **extra})


def _screen(emu, pane) -> str:
    r = call(emu, "pane.read", {"pane_id": pane, "source": "visible", "format": "text"})
    return r["result"]["read"]["text"] if "result" in r else ""


@pytest.mark.parametrize(
    "argv, why",
    [
        (["/usr/bin/sh", "-c", "true"], "plain command name"),
        ([], "a command first"),
        (["sh", "-c", "echo it's"], "apostrophe"),
        (["sh", "-c", "a\nb"], "control character"),
        (["sh"] * 65, "at most 64"),
        (["sh", "x" * 8200], "8192 bytes"),
    ],
)
def test_a_bad_resume_argv_is_refused_and_the_report_not_applied(emulator09, argv, why):
    ok(emulator09, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emulator09, LINE_AGENT)
    reply = _report(emulator09, pane, argv)
    assert reply["error"]["code"] == "invalid_resume_argv" and why in reply["error"]["message"]
    assert "agent" not in ok(emulator09, "pane.get", {"pane_id": pane})["pane"]  # not applied


def test_a_custom_reporter_must_hold_the_pane_first(emulator09):
    ok(emulator09, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emulator09, LINE_AGENT)
    reply = _report(emulator09, pane, method="pane.report_agent_session", agent_session_id="s1")
    assert reply["error"]["code"] == "resume_not_accepted", reply
    assert _report(emulator09, pane)["result"] == {"type": "ok"}  # report_agent holds it
    reply = _report(emulator09, pane, method="pane.report_agent_session", agent_session_id="s1")
    assert reply["result"] == {"type": "ok"}
    assert emulator09.pane(pane).resume_argv["argv"] == ARGV


def test_a_cold_restart_types_the_reported_command(make_emulator):
    emu = make_emulator(protocol=22, resume_agents=True)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emu, LINE_AGENT)
    kept = apply_tab(emu, LINE_AGENT, label="/p/b")
    released = apply_tab(emu, LINE_AGENT, label="/p/c")
    for p in (pane, kept, released):
        assert _report(emu, p, [*ARGV[:-1], p])["result"] == {"type": "ok"}
    ok(emu, "pane.release_agent", {"pane_id": released, "source": "custom:orcr", "agent": "orcr"})
    emu.set_agent(kept, "claude")  # another agent holds it now: its command is dropped
    emu.set_agent_session(kept, "sess-9", agent="claude")
    emu.restart()
    until(lambda: f"RESUMED-{pane}" in _screen(emu, pane), what="the reported command ran")
    until(lambda: "claude --resume sess-9" in _screen(emu, kept), what="the built-in resume")
    assert "RESUMED" not in _screen(emu, kept) and "RESUMED" not in _screen(emu, released)
    assert emu.violations == []


def test_08_ignores_the_field(make_emulator):
    """0.8 has no ``resume_argv`` (its schema lets unknown fields through): the report
    is applied without it, as "older Herdr versions ignore the field"."""
    emu = make_emulator(protocol=20, resume_agents=True)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emu, LINE_AGENT)
    assert _report(emu, pane)["result"] == {"type": "ok"}
    assert emu.pane(pane).resume_argv is None
    assert emu.pane(pane).agent == "orcr" and emu.violations == []
