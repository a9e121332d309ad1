"""Park and un-park on real tmux: ``move-window`` guarded by the pane's marks."""

from __future__ import annotations

import pytest

from orcr_core.contracts import PARKING, DriverError, PaneRef, StartSpec


def _where(driver, token):
    (pane,) = [p for p in driver.snapshot() if p.launch_token == token]
    return pane


def test_move_parks_and_brings_back_only_a_marked_pane(h, driver, workdir):
    ws = driver.ensure_workspace("alpha")
    spec = StartSpec(
        ws, "alpha/one", str(workdir), ("sleep", "60"), instance="inst1", launch_token="tok1"
    )
    ref = driver.start(spec)
    pid = _where(driver, "tok1").pid
    for instance, token in (("inst2", "tok1"), ("inst1", "tok2"), ("inst1;x", "tok1")):
        with pytest.raises(DriverError) as exc:
            driver.move(
                PaneRef(ref.workspace_id, ref.tab_id, ref.pane_id, instance, token), PARKING
            )
        assert exc.value.code == "pane_not_found"
        assert not _where(driver, "tok1").parked, (instance, token)
    marked = PaneRef(ref.workspace_id, ref.tab_id, ref.pane_id, "inst1", "tok1")
    parked = driver.move(marked, PARKING)
    assert parked.workspace_id == driver.parking_session() and parked.pane_id == ref.pane_id
    pane = _where(driver, "tok1")
    assert pane.parked and pane.workspace_id == driver.parking_session()
    assert (pane.pid, pane.label, pane.instance) == (pid, "alpha/one", "inst1")  # same process
    back = driver.move(marked, driver.ensure_workspace("alpha"))
    pane = _where(driver, "tok1")
    assert not pane.parked and pane.workspace_id == back.workspace_id == "orcr-alpha"
    assert h.pane_ids() == {ref.pane_id}  # one pane, never doubled
    with pytest.raises(DriverError) as exc:
        driver.move(PaneRef(ws, "@99", "%99", "inst1", "tok1"), PARKING)
    assert exc.value.code == "pane_not_found"
