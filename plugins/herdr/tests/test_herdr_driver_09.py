"""The driver on herdr 0.9 (protocol 22) and 0.8: what differs between them."""

from __future__ import annotations

import pytest
from orcr_herdr.client import HerdrClient
from orcr_herdr.driver import HerdrDriver

from orcr_core.contracts import DriverError


@pytest.mark.parametrize("protocol", [20, 22])
def test_replies_are_matched_by_id(make_emulator, config_factory, protocol):
    emu = make_emulator(protocol=protocol)
    driver = HerdrDriver(config_factory())

    def stray(method, reply):
        reply["id"] = "someone-else"
        return reply

    emu.corrupt_next_reply(stray)
    with pytest.raises(DriverError) as exc:
        driver.request("workspace.list", {})
    assert exc.value.code == "bad_reply" and "someone-else" in str(exc.value)
    with pytest.raises(DriverError) as exc:  # an error reply: "" on 0.8, the id on 0.9
        driver.request("pane.get", {"pane_id": "w9:p9"})
    assert exc.value.code == "pane_not_found"
    # a rejected subscription entry: 0.8's probe id, 0.9's request id
    with pytest.raises(DriverError) as exc:
        next(HerdrClient(emu.socket_path).subscribe([{"type": "pane.output_matched",
             "pane_id": "w9:p9", "source": "visible", "match": {"type": "substring",
             "value": "x"}}]))  # fmt: skip
    assert exc.value.code == "pane_not_found"


def test_removed_methods_are_unknown_method_on_22(make_emulator, config_factory):
    make_emulator(protocol=22)
    with pytest.raises(DriverError) as exc:
        HerdrDriver(config_factory()).request("pane.graphics.info", {"pane_id": "w1:p1"})
    assert exc.value.code == "unknown_method" and not exc.value.retryable


@pytest.mark.parametrize("protocol", [20, 22])
def test_resume_command_reported_on_22_only_and_under_herdrs_pair_for_its_agents(
    make_emulator, config_factory, protocol
):
    """``report_resume``: nothing on 0.8; on 0.9 ``custom:orcr`` for an agent herdr
    does not know, herdr's own pair for one it detects, and not at all (retryable)
    for one of herdr's agents it has not detected yet."""
    from orcr_testing.herdr.wire import LINE_AGENT, apply_tab

    from orcr_core.contracts import PaneRef

    emu = make_emulator(protocol=protocol)
    driver = HerdrDriver(config_factory())
    driver.handshake()
    emu_ws = driver.ensure_workspace("p")
    pane_id = apply_tab(emu, LINE_AGENT, ws=emu_ws)
    ref = PaneRef(emu_ws, "", pane_id)
    argv, env = ["/usr/bin/prog", "--resume"], {"ORCR_ID": "u1"}
    owned = driver.report_resume(ref, "echo", "idle", argv, env)
    if protocol == 20:
        assert owned is False and emu.pane(pane_id).resume_argv is None
        assert emu.pane(pane_id).agent is None  # nothing sent
        return
    assert owned is True
    held = emu.pane(pane_id).resume_argv
    assert held == {"source": "custom:orcr", "agent": "echo", "argv": ["env", "ORCR_ID=u1", *argv]}
    with pytest.raises(DriverError) as exc:
        driver.report_resume(ref, "claude", "idle", argv, env, detected=None)
    assert exc.value.code == "agent_not_detected" and exc.value.retryable
    emu.set_agent(pane_id, "claude")
    assert driver.report_resume(ref, "claude", "idle", argv, env, detected="claude") is False
    assert emu.pane(pane_id).resume_argv["source"] == "herdr:claude"
    assert driver.foreground_pids(ref) == []  # the line agent is the pane's own process
