"""The optional driver capabilities are runtime_checkable Protocols in
orcr_core.contracts (issue 34 item 5), checked with isinstance: each bundled driver
has exactly the ones it implements, and a driver with half of one has none of it."""

from __future__ import annotations

from types import SimpleNamespace

from orcr_herdr.driver import HerdrDriver
from orcr_tmux.driver import TmuxDriver

from orcr_core.contracts import (
    AttachCommand,
    Availability,
    Discovery,
    Focus,
    NativeResume,
    PaneEvents,
    PaneProcesses,
    Parking,
    ProgramProcess,
    SplitPrompt,
)
from orcr_core.pm.drivers import availability

CAPS = (SplitPrompt, Parking, PaneProcesses, NativeResume)
MORE = (PaneEvents, Discovery, Focus, AttachCommand)


def test_each_bundled_driver_has_the_capabilities_it_implements():
    """Planted: SplitPrompt naming `submit` for `submit_prompt` -> fails (neither
    driver splits, and delivery would record one step)."""
    assert all(issubclass(HerdrDriver, cap) for cap in CAPS)
    assert [cap.__name__ for cap in CAPS if issubclass(TmuxDriver, cap)] == [
        "SplitPrompt",
        "Parking",
        "PaneProcesses",
    ]
    # tmux runs the argv itself; herdr's pane process is its shell, not the program
    assert issubclass(TmuxDriver, ProgramProcess) and not issubclass(HerdrDriver, ProgramProcess)


def test_half_a_capability_is_none_of_it():
    """Planted: SplitPrompt without submit_prompt (a driver that cannot press Enter
    alone would be sent a split prompt) -> fails."""
    assert not isinstance(SimpleNamespace(paste_prompt=print), SplitPrompt)
    assert isinstance(SimpleNamespace(paste_prompt=print, submit_prompt=print), SplitPrompt)
    assert not isinstance(SimpleNamespace(reports_resume=bool), NativeResume)
    assert isinstance(SimpleNamespace(pane_pid=lambda pane: None), PaneProcesses)
    assert not isinstance(None, Parking)


def test_the_capabilities_once_found_with_getattr_are_protocols_too():
    """events, discover, focus, attach_command and the factory's available were read
    with getattr; now each is a Protocol the core checks with isinstance.
    Planted: Discovery naming `discover_agents` -> fails (and `orcr agent ls
    --unmanaged` would list nothing on herdr)."""
    assert [cap.__name__ for cap in MORE if issubclass(HerdrDriver, cap)] == [
        "PaneEvents",
        "Discovery",
        "Focus",
    ]
    assert [cap.__name__ for cap in MORE if issubclass(TmuxDriver, cap)] == [
        "PaneEvents",
        "Focus",
        "AttachCommand",
    ]
    assert isinstance(TmuxDriver, Availability) and isinstance(HerdrDriver, Availability)


def test_a_factory_without_an_availability_check_counts_as_available():
    """Planted: availability() calling a missing `available` -> AttributeError."""

    def factory(config):
        return None

    assert not isinstance(factory, Availability)
    assert availability(factory) == (True, "no availability check")
    factory.available = lambda: (False, "none here")  # the argument-less form
    assert availability(factory) == (False, "none here")
