"""Panes run real processes on real PTYs; input, labels, agent state and restarts."""

from __future__ import annotations

import json
import sys
import time

from orcr_testing.herdr.wire import LINE_AGENT, apply_tab, call, ok

from orcr_core.kit.testing import until

PRINT_ENV = [
    sys.executable,
    "-c",
    "import os, sys, time\n"
    "print('ARGV', sys.argv[1:])\n"
    "for k in ('HERDR_ENV', 'HERDR_PANE_ID', 'HERDR_SOCKET_PATH', 'ORCR_ID', 'TERM'):\n"
    "    print(k, os.environ.get(k))\n"
    "print('TTY', os.isatty(0))\n"
    "time.sleep(30)",
    "$HOME",
    "a b",
]


def screen(emu, pane_id: str) -> str:
    return ok(emu, "pane.read", {"pane_id": pane_id, "source": "visible"})["read"]["text"]


def test_layout_apply_execs_argv_on_a_pty_with_herdr_env(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    params = {
        "workspace_id": "w1",
        "tab_label": "agent",
        "focus": False,
        "root": {
            "type": "pane",
            "label": "  /proj/agent-a ",
            "cwd": "/tmp",
            "command": PRINT_ENV,
            "env": {"ORCR_ID": "u-1", "HERDR_PANE_ID": "spoofed"},
        },
    }
    layout = ok(emulator, "layout.apply", params)["layout"]
    pane = layout["root"]["pane_id"]
    assert (layout["tab_id"], pane) == ("w1:t2", "w1:p2")
    text = until(lambda: (t := screen(emulator, pane)) and "TTY" in t and t)
    assert "ARGV ['$HOME', 'a b']" in text  # no shell expanded or split anything
    assert f"HERDR_PANE_ID {pane}" in text  # injected values win over the caller's env
    assert f"HERDR_SOCKET_PATH {emulator.socket_path}" in text
    assert "HERDR_ENV 1" in text and "ORCR_ID u-1" in text and "TERM xterm-256color" in text
    assert "TTY True" in text
    info = ok(emulator, "pane.get", {"pane_id": pane})["pane"]
    assert info["label"] == "/proj/agent-a"  # trimmed
    assert info["terminal_id"].startswith("term_")


def test_layout_apply_refuses_a_missing_program_and_an_empty_command(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    root = {"type": "pane", "command": ["/nonexistent/agent"]}
    reply = call(emulator, "layout.apply", {"workspace_id": "w1", "root": root})
    assert reply["error"]["code"] == "layout_apply_failed"
    reply = call(
        emulator, "layout.apply", {"workspace_id": "w1", "root": {"type": "pane", "command": []}}
    )
    assert reply["error"]["code"] == "invalid_layout"
    assert len(ok(emulator, "tab.list")["tabs"]) == 1  # nothing half-made left behind
    reply = call(emulator, "layout.apply", {"workspace_id": "w9", "root": {"type": "pane"}})
    assert reply["error"]["code"] == "workspace_not_found"


def test_rename_trims_clears_and_emits_nothing(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    mark = len(emulator.retained_events())
    assert (
        ok(emulator, "pane.rename", {"pane_id": "w1:p1", "label": " x/y "})["pane"]["label"]
        == "x/y"
    )
    assert "label" not in ok(emulator, "pane.rename", {"pane_id": "w1:p1", "label": "  "})["pane"]
    assert emulator.retained_events()[mark:] == []


def test_send_keys_validates_every_key_before_writing(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emulator, LINE_AGENT)
    reply = call(emulator, "pane.send_keys", {"pane_id": pane, "keys": ["h", "nosuchkey"]})
    assert reply["error"]["code"] == "invalid_key"
    assert emulator.inputs(pane) == []


def test_text_and_enter_in_one_write_stays_unsubmitted_when_enter_too_early(make_emulator):
    emu = make_emulator(enter_too_early=True, enter_window=1.0)  # wide: robust under load
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emu, LINE_AGENT)
    until(lambda: "READY" in screen(emu, pane))
    ok(emu, "pane.send_input", {"pane_id": pane, "text": "one", "keys": ["enter"]})
    ok(emu, "pane.send_keys", {"pane_id": pane, "keys": ["enter"]})  # inside the window: too early
    time.sleep(1.0)
    assert "GOT:" not in screen(emu, pane) and "one" in screen(emu, pane)
    assert [r.swallowed_enters for r in emu.inputs(pane)] == [1, 1]
    assert emu.inputs(pane)[0].sent == b"one\r" and emu.inputs(pane)[0].delivered == b"one"
    ok(emu, "pane.send_keys", {"pane_id": pane, "keys": ["enter"]})  # after the window
    until(lambda: "GOT:one" in screen(emu, pane))
    assert emu.violations == []


def test_drop_enter_probability_swallows_only_the_first_enter(make_emulator):
    emu = make_emulator(drop_enter_probability=1.0, seed=3)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emu, LINE_AGENT)
    until(lambda: "READY" in screen(emu, pane))
    ok(emu, "pane.send_text", {"pane_id": pane, "text": "two"})
    ok(emu, "pane.send_keys", {"pane_id": pane, "keys": ["enter"]})
    time.sleep(0.3)
    assert "GOT:" not in screen(emu, pane)
    ok(emu, "pane.send_keys", {"pane_id": pane, "keys": ["enter"]})  # the re-press works
    until(lambda: "GOT:two" in screen(emu, pane))


def test_send_input_wraps_text_in_bracketed_paste_only_when_enabled(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    paste_app = [
        sys.executable,
        "-c",
        "import sys, time; sys.stdout.write('\\x1b[?2004hPASTE-ON\\n'); sys.stdout.flush(); "
        "time.sleep(30)",
    ]
    pane = apply_tab(emulator, paste_app)
    until(lambda: "PASTE-ON" in screen(emulator, pane))
    ok(emulator, "pane.send_input", {"pane_id": pane, "text": "hi\nthere"})
    assert emulator.inputs(pane)[-1].delivered == b"\x1b[200~hi\nthere\x1b[201~"
    ok(emulator, "pane.send_text", {"pane_id": pane, "text": "raw"})
    assert emulator.inputs(pane)[-1].delivered == b"raw"  # send_text is never a paste


def test_agent_session_appears_without_event_and_follows_official_rules(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emulator, LINE_AGENT)
    emulator.set_agent(pane, "claude", "idle")
    mark = len(emulator.retained_events())

    def report(**kw):
        params = {"pane_id": pane, "source": "herdr:claude", "agent": "claude", **kw}
        assert ok(emulator, "pane.report_agent_session", params) == {"type": "ok"}
        return ok(emulator, "pane.get", {"pane_id": pane})["pane"].get("agent_session")

    assert report(source="my-hook", agent_session_id="nope") is None  # unofficial: ignored
    first = report(agent_session_id="s-1", seq=10, session_start_source="startup")
    assert first == {"source": "herdr:claude", "agent": "claude", "kind": "id", "value": "s-1"}
    assert report(agent_session_id="s-2", seq=5, session_start_source="clear")["value"] == "s-1"
    assert report(agent_session_id="s-2", seq=11, session_start_source="startup")["value"] == "s-1"
    assert report(agent_session_id="s-2", seq=12, session_start_source="clear")["value"] == "s-2"
    assert report(source="herdr:codex", agent="codex", agent_session_id="c")["value"] == "s-2"
    emulator.set_agent_session(pane, "s-3")  # the test hook: also silent
    assert ok(emulator, "pane.get", {"pane_id": pane})["pane"]["agent_session"]["value"] == "s-3"
    assert emulator.retained_events()[mark:] == []  # nothing announced any of it
    emulator.exit_agent(pane)
    info = ok(emulator, "pane.get", {"pane_id": pane})["pane"]
    assert "agent_session" not in info and "agent" not in info
    released = emulator.retained_events()[-1]
    assert released["data"] == {
        "type": "pane_agent_detected",
        "pane_id": pane,
        "workspace_id": "w1",
        "released": True,
        "final_status": "idle",
    }


def test_foreground_claude_process_is_detected(emulator, tmp_path):
    fake = tmp_path / "claude"
    fake.write_text(f"#!{sys.executable}\nimport time\nprint('fake claude')\ntime.sleep(30)\n")
    fake.chmod(0o755)
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    ok(emulator, "pane.send_text", {"pane_id": "w1:p1", "text": f"exec {fake}\r"})
    info = until(lambda: ok(emulator, "pane.get", {"pane_id": "w1:p1"})["pane"].get("agent"))
    assert info == "claude"
    assert any(e["event"] == "pane_agent_detected" for e in emulator.retained_events())


def test_restart_keeps_ids_and_labels_with_new_terminals_and_plain_shells(make_emulator):
    emu = make_emulator(resume_agents=False)
    ok(emu, "workspace.create", {"label": "proj", "cwd": "/tmp"})
    pane = apply_tab(emu, LINE_AGENT, label="proj/agent-a")
    emu.set_agent_session(pane, "s-1", agent="claude")
    before = {p["pane_id"]: p for p in ok(emu, "pane.list")["panes"]}
    emu.restart()
    assert json.loads(emu.session_file.read_text())["workspaces"][0]["workspace_id"] == "w1"
    after = {p["pane_id"]: p for p in ok(emu, "pane.list")["panes"]}
    assert after.keys() == before.keys()
    assert after[pane]["label"] == "proj/agent-a"
    assert ok(emu, "workspace.list")["workspaces"][0]["label"] == "proj"
    assert all(after[p]["terminal_id"] != before[p]["terminal_id"] for p in after)
    assert "agent_session" not in after[pane]  # resume disabled: a plain shell
    assert emu.pane(pane).proc.argv == ["/bin/sh"]  # the agent process is gone
    assert emu.retained_events() == []  # a new server starts with an empty ring
    nxt = apply_tab(emu, LINE_AGENT, label="proj/agent-b")
    assert nxt == "w1:p3"  # counters were persisted: closed/used ids are not reused


def test_pending_resume_panes_refuse_reads_until_resumed(make_emulator):
    emu = make_emulator(resume_agents=True)
    ok(emu, "workspace.create", {"cwd": "/tmp"})
    pane = apply_tab(emu, LINE_AGENT)
    emu.set_agent_session(pane, "sess-9", agent="claude")
    emu.restart()
    assert call(emu, "pane.read", {"pane_id": pane, "source": "visible"})["error"]["code"] == (
        "pane_not_found"
    )
    assert ok(emu, "pane.get", {"pane_id": pane})["pane"]["agent_session"]["value"] == "sess-9"
    text = until(lambda: "result" in (r := call(emu, "pane.read", {"pane_id": pane,
                    "source": "visible"})) and r["result"]["read"]["text"])  # fmt: skip
    until(lambda: "claude --resume sess-9" in screen(emu, pane))
    assert text is not None


def test_crash_loses_unsaved_changes_and_hands_their_ids_out_again(make_emulator):
    """herdr saves 5 s after a change and not its workspace counter, so a workspace a
    crash lost gives its id, and its panes' ids, to the next one made (ORCR-NOTES §6):
    why the driver suite checks a reused pane id is never typed into."""
    emu = make_emulator(save_delay=60)
    ok(emu, "workspace.create", {"label": "kept", "cwd": "/tmp"})
    emu.restart()  # a clean stop saves
    ok(emu, "pane.rename", {"pane_id": "w1:p1", "label": "fresh"})
    lost = ok(emu, "workspace.create", {"label": "lost", "cwd": "/tmp"})["workspace"]
    emu.crash()
    emu.start()
    assert "label" not in ok(emu, "pane.get", {"pane_id": "w1:p1"})["pane"]
    assert [w["label"] for w in ok(emu, "workspace.list")["workspaces"]] == ["kept"]
    made = ok(emu, "workspace.create", {"label": "next", "cwd": "/tmp"})["workspace"]
    assert made["workspace_id"] == lost["workspace_id"], (lost, made)


def test_server_stop_answers_then_stops(emulator):
    assert ok(emulator, "server.stop") == {"type": "ok"}
    assert emulator.stop_requested.wait(5)
    until(lambda: emulator.stopped.is_set())


def test_a_private_sgr_sequence_leaves_the_pane_alive(emulator):
    """Gemini CLI sends xterm's modifyOtherKeys (``CSI > 4 ; 2 m``) at start: pyte
    passed it to the screen's rendition handler, which raised and ended the pane's
    reader (the pane read as exited before orcr typed). It is ignored now."""
    ok(emulator, "workspace.create", {"cwd": "/tmp"})
    code = (
        "import sys, time\n"
        "sys.stdout.write('\\x1b[>4;2mstill \\x1b[1mhere\\x1b[0m\\n'); sys.stdout.flush()\n"
        "time.sleep(30)"
    )
    params = {"workspace_id": "w1", "tab_label": "a", "focus": False,
              "root": {"type": "pane", "label": "p", "cwd": "/tmp",
                       "command": [sys.executable, "-c", code]}}  # fmt: skip
    pane = ok(emulator, "layout.apply", params)["layout"]["root"]["pane_id"]
    until(lambda: "still here" in screen(emulator, pane))
    time.sleep(0.3)
    assert not ok(emulator, "pane.get", {"pane_id": pane})["pane"].get("dead", False)
    assert "still here" in screen(emulator, pane)


def _mask(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(ln for ln in fh if ln.startswith(field + ":")).split()[1], 16)


def test_a_panes_program_gets_default_signals_whatever_the_emulator_inherited(tmp_path):
    """Started in the background of a script, a process ignores SIGINT and SIGQUIT, and
    its children inherit that (a droprule test's Ctrl+C never stopped ``cat``); a
    blocked signal is inherited too. Like herdr (portable-pty) and tmux, the emulator
    sets a pane's program back to the defaults."""
    import signal

    from orcr_testing.herdr.ptyproc import PaneProcess

    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        proc = PaneProcess(["sleep", "30"], str(tmp_path), {"PATH": "/usr/bin:/bin"})
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    try:
        bits = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGQUIT - 1))
        assert _mask(proc.pid, "SigIgn") & bits == 0
        assert _mask(proc.pid, "SigBlk") == 0
    finally:
        proc.kill_now()
