"""The schema checker bites: planted bad replies and events are recorded as violations."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import orcr_testing.herdr
import pytest
from orcr_testing.herdr.schema import VENDORED, SchemaChecker, default_checker, find_schema
from orcr_testing.herdr.wire import ok


def test_the_vendored_schema_is_used_with_its_licence_and_provenance(monkeypatch):
    monkeypatch.delenv("ORCR_HERDR_SCHEMA", raising=False)
    here = Path(orcr_testing.herdr.__file__).parent / "herdr_schema"
    assert find_schema() == VENDORED == here / "herdr-api.schema.json"
    assert default_checker().path == VENDORED
    assert default_checker().protocol == 20
    assert "Apache License" in (here / "LICENSE").read_text()
    notice = (here / "NOTICE").read_text()
    digest = re.search(r"sha256\s+([0-9a-f]{64})", notice).group(1)
    assert hashlib.sha256(VENDORED.read_bytes()).hexdigest() == digest
    assert "github.com/ogulcancelik/herdr" in notice and "Version:   herdr 0.8.0" in notice
    assert {"layout.apply", "pane.send_input", "events.subscribe"} <= default_checker().methods


def test_env_var_overrides_the_schema_location(monkeypatch, tmp_path):
    # the vendored schema's path, read before the variable points elsewhere (run alone,
    # default_checker's first, cached build would otherwise see the missing file)
    vendored = Path(default_checker().path)
    monkeypatch.setenv("ORCR_HERDR_SCHEMA", str(tmp_path / "missing.json"))
    assert find_schema() is None
    with pytest.raises(FileNotFoundError):
        SchemaChecker()
    monkeypatch.setenv("ORCR_HERDR_SCHEMA", str(vendored))
    assert find_schema() == vendored


def test_checker_rejects_bad_messages():
    c = default_checker()
    assert c.check_request({"id": "1", "method": "pane.read", "params": {"pane_id": "w1:p1"}})
    assert c.check_request({"id": "1", "method": "pane.read",
                            "params": {"pane_id": "w1:p1", "source": "visible"}}) == []  # fmt: skip
    assert c.check_reply({"id": "1", "result": {"type": "pane_info", "pane": {"pane_id": "x"}}})
    assert c.check_reply({"id": "1", "result": {"type": "no_such_type"}})
    assert c.check_reply({"id": "1", "error": {"code": "x"}})  # message is required
    assert c.check_event({"event": "pane_closed", "data": {"type": "pane_closed"}})
    assert c.check_event({"event": "pane_closed", "data": {"type": "pane_exited",
                          "pane_id": "w1:p1", "workspace_id": "w1"}})  # fmt: skip
    assert c.check_event({"event": "pane.agent_status_changed",
                          "data": {"pane_id": "w1:p1", "workspace_id": "w1",
                                   "agent_status": "sleepy"}})  # fmt: skip


def test_planted_bad_reply_is_recorded(emulator):
    ok(emulator, "workspace.create", {"cwd": "/tmp"})

    def drop_terminal_id(method, reply):
        del reply["result"]["pane"]["terminal_id"]
        return reply

    emulator.corrupt_next_reply(drop_terminal_id)
    ok(emulator, "pane.get", {"pane_id": "w1:p1"})
    assert len(emulator.violations) == 1
    violation = emulator.violations[0]
    assert (
        violation.kind == "reply" and "'terminal_id' is a required property" in violation.errors[0]
    )
    emulator.violations.clear()


def test_planted_bad_event_is_recorded(emulator):
    emulator.publish("pane_closed", {"pane_id": "w1:p1"})  # workspace_id missing
    assert [v.kind for v in emulator.violations] == ["event"]
    emulator.violations.clear()


def test_a_busy_session_stays_schema_clean(emulator):
    """Every reply and event of a typical session validates (the fixture asserts it)."""
    from orcr_testing.herdr.wire import LINE_AGENT, apply_tab

    ok(emulator, "workspace.create", {"label": "p", "cwd": "/tmp"})
    pane = apply_tab(emulator, LINE_AGENT)
    emulator.set_agent(pane, "codex", "working")
    emulator.set_agent_session(pane, "t-1")
    for method, params in [
        ("session.snapshot", {}),
        ("workspace.get", {"workspace_id": "w1"}),
        ("tab.get", {"tab_id": "w1:t2"}),
        ("pane.current", {}),
        ("pane.focus", {"pane_id": pane}),
        ("agent.list", {}),
        ("agent.get", {"target": pane}),
        ("pane.process_info", {"pane_id": pane}),
        ("pane.read", {"pane_id": pane, "source": "recent", "lines": 5}),
        ("tab.rename", {"tab_id": "w1:t2", "label": "x"}),
        ("workspace.rename", {"workspace_id": "w1", "label": "q"}),
        ("pane.split", {"target_pane_id": pane, "direction": "right"}),
        (
            "pane.report_agent",
            {"pane_id": "w1:p1", "source": "me", "agent": "bot", "state": "working"},
        ),  # fmt: skip
    ]:
        ok(emulator, method, params)
    names = {e["event"] for e in emulator.retained_events()}
    assert {"pane_focused", "tab_renamed", "workspace_renamed", "pane_agent_detected"} <= names
