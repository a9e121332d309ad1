"""``pane.move`` in the emulator (schema-checked) and the driver's park/un-park on it."""

from __future__ import annotations

import pytest
from orcr_testing.herdr.wire import LINE_AGENT

from orcr_core import dirs
from orcr_core.contracts import PARKING, DriverError, PaneRef, StartSpec


def _start(driver, label="proj/agent_a", token="tok1"):
    ws = driver.ensure_workspace("proj")
    spec = StartSpec(ws, label, "/tmp", tuple(LINE_AGENT), {"ORCR_ID": "u1"},
                     instance=dirs.instance_id(), launch_token=token)  # fmt: skip
    ref = driver.start(spec)
    return PaneRef(ref.workspace_id, ref.tab_id, ref.pane_id, dirs.instance_id(), token)


def _ws_label(emulator, pane_id):
    return emulator.workspaces[emulator.pane(pane_id).workspace_id].label


def test_park_and_unpark_keep_the_terminal_and_the_marks(driver, emulator):
    ref = _start(driver)
    before = emulator.pane(ref.pane_id)
    terminal, proc = before.terminal_id, before.proc
    parked = driver.move(ref, PARKING)
    assert parked.pane_id != ref.pane_id  # another workspace: a new public id
    pane = emulator.pane(parked.pane_id)
    assert (pane.terminal_id, pane.proc, pane.label) == (terminal, proc, "proj/agent_a")
    moved = [e for e in emulator.retained_events() if "pane_moved" in str(e)]
    assert len(moved) == 1, moved  # one event, no fake close/create
    assert _ws_label(emulator, parked.pane_id) == "orcr-parked-" + dirs.instance_id()
    # the source workspace lost its last pane and closed; the parking one has no shell
    assert "proj" not in {ws.label for ws in emulator.workspaces.values()}
    assert [p.label for p in emulator.panes()] == ["proj/agent_a"]
    snap = {p.launch_token: p for p in driver.snapshot()}
    assert snap["tok1"].parked and snap["tok1"].pane_id == parked.pane_id

    home = driver.ensure_workspace("proj")
    back = driver.move(PaneRef(**{**parked.__dict__, "instance": ref.instance,
                                  "launch_token": "tok1"}), home)  # fmt: skip
    assert _ws_label(emulator, back.pane_id) == "proj"
    assert emulator.pane(back.pane_id).terminal_id == terminal
    snap = {p.launch_token: p for p in driver.snapshot()}
    assert not snap["tok1"].parked and snap["tok1"].instance == dirs.instance_id()
    assert [p.label for p in emulator.panes()] == ["proj/agent_a"]  # never doubled


def test_emulator_pane_move_destinations(driver, emulator):
    a = _start(driver, "proj/a", "ta")
    b = _start(driver, "proj/b", "tb")
    # into an existing tab of the same workspace: same id, the emptied tab closes
    res = driver.request(
        "pane.move",
        {
            "pane_id": a.pane_id,
            "destination": {"type": "tab", "tab_id": b.tab_id, "split": "right"},
        },
    )["move_result"]
    assert res["changed"] and res["pane"]["pane_id"] == a.pane_id
    assert res["closed_tab_id"] == a.tab_id and res["pane"]["tab_id"] == b.tab_id
    same = driver.request(
        "pane.move",
        {"pane_id": a.pane_id, "destination": {"type": "tab", "tab_id": b.tab_id, "split": "down"}},
    )["move_result"]
    assert not same["changed"] and same["reason"] == "same_tab"
    moved = driver.request(
        "pane.move",
        {"pane_id": a.pane_id, "destination": {"type": "new_workspace", "label": "elsewhere"}},
    )["move_result"]
    assert moved["created_workspace"]["label"] == "elsewhere"
    assert emulator.pane(moved["pane"]["pane_id"]).label == "proj/a"
    with pytest.raises(DriverError):
        driver.request("pane.move", {"pane_id": "w9:p9", "destination": {"type": "new_tab"}})


def test_a_zoomed_tab_refuses_the_move(driver, emulator):
    ref = _start(driver)
    emulator.zoom_tab(ref.tab_id)
    res = driver.request("pane.move", {"pane_id": ref.pane_id, "destination": {"type": "new_tab"}})[
        "move_result"
    ]
    assert not res["changed"] and res["reason"] == "zoomed_tab"
    with pytest.raises(DriverError) as exc:
        driver.move(ref, PARKING)
    assert exc.value.code == "pane_move_failed" and "zoomed_tab" in str(exc.value)
    assert _ws_label(emulator, ref.pane_id) == "proj"  # did not move
    emulator.zoom_tab(ref.tab_id, False)
    assert driver.move(ref, PARKING).pane_id != ref.pane_id
