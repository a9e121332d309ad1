"""herdr reuses a pane id after a restart: its workspace counter is not saved, so a
workspace lost before the restart (herdr saves 5 s after a change; a crash loses the
rest) gives its id, and its panes' ids, to the next workspace made (ORCR-NOTES §6). A
starting agent's recorded pane can then name another agent's pane, as the soak saw on
tmux (seed 2027). The prompt's paste and Enter go only to a pane whose tab carries the
agent's marks (instance and launch token)."""

from __future__ import annotations

import pytest
from orcr_herdr.driver import HerdrDriver
from orcr_testing.herdr.wire import LINE_AGENT

from orcr_core.contracts import DriverError, PaneRef, StartSpec
from orcr_core.kit.testing import until

from .conftest import make_config


def _start(driver: HerdrDriver, path: str, token: str) -> PaneRef:
    """An agent's pane, as orcr refers to it from the row (launch.pane_of): with marks."""
    ws = driver.ensure_workspace(path.split("/")[0])
    ref = driver.start(
        StartSpec(ws, path, "/tmp", tuple(LINE_AGENT), instance="i1", launch_token=token)
    )
    return PaneRef(ref.workspace_id, ref.tab_id, ref.pane_id, "i1", token)


@pytest.mark.parametrize("protocol", [20, 22])
def test_a_prompt_is_never_typed_into_a_pane_that_reused_the_id(make_emulator, protocol):
    emu = make_emulator(protocol=protocol, save_delay=60)  # nothing saved before the crash
    driver = HerdrDriver(make_config())
    a = _start(driver, "proj/a", "ta")
    emu.crash()
    emu.start()
    b = _start(driver, "other/b", "tb")
    assert b.pane_id == a.pane_id  # herdr gave a's pane id to b's pane
    until(lambda: "READY" in driver.read(b), what="b's program")
    with pytest.raises(DriverError) as exc:
        driver.paste_prompt(a, "intruder")
    assert exc.value.code == "pane_not_found" and "not this agent's" in str(exc.value)
    with pytest.raises(DriverError) as exc:
        driver.submit_prompt(a)
    assert exc.value.code == "pane_not_found"
    assert emu.inputs(b.pane_id) == []  # neither the text nor the Enter reached b
    driver.send_prompt(b, "hello")
    until(lambda: "GOT:hello" in driver.read(b), what="b's own prompt")
    assert "intruder" not in driver.read(b)
    assert [(v.kind, v.errors) for v in emu.violations] == []
