"""The optional driver capabilities are runtime_checkable Protocols in
orcr_core.contracts (issue 34 item 5), checked with isinstance: each bundled driver
has exactly the ones it implements, and a driver with half of one has none of it."""

from __future__ import annotations

from types import SimpleNamespace

from orcr_herdr.driver import HerdrDriver
from orcr_tmux.driver import TmuxDriver

from orcr_core.contracts import NativeResume, PaneProcesses, Parking, SplitPrompt

CAPS = (SplitPrompt, Parking, PaneProcesses, NativeResume)


def test_each_bundled_driver_has_the_capabilities_it_implements():
    """Planted: SplitPrompt naming `submit` for `submit_prompt` -> fails (neither
    driver splits, and delivery would record one step)."""
    assert all(issubclass(HerdrDriver, cap) for cap in CAPS)
    assert [cap.__name__ for cap in CAPS if issubclass(TmuxDriver, cap)] == [
        "SplitPrompt",
        "Parking",
        "PaneProcesses",
    ]


def test_half_a_capability_is_none_of_it():
    """Planted: SplitPrompt without submit_prompt (a driver that cannot press Enter
    alone would be sent a split prompt) -> fails."""
    assert not isinstance(SimpleNamespace(paste_prompt=print), SplitPrompt)
    assert isinstance(SimpleNamespace(paste_prompt=print, submit_prompt=print), SplitPrompt)
    assert not isinstance(SimpleNamespace(reports_resume=bool), NativeResume)
    assert isinstance(SimpleNamespace(pane_pid=lambda pane: None), PaneProcesses)
    assert not isinstance(None, Parking)
