"""The herdr driver runs the multiplexer driver suite (orcr_testing.conformance) on the
schema-checked emulator as herdr 0.9.3 (socket protocol 22) and as herdr 0.8 (20)."""

from __future__ import annotations

import pytest
from orcr_herdr.driver import HerdrDriver
from orcr_testing.conformance import DriverSuite

from .conftest import make_config


class TestHerdrDriver(DriverSuite):
    @pytest.fixture(params=[22, 20], ids=["protocol22", "protocol20"])
    def make_driver(self, request, make_emulator):
        emu = make_emulator(protocol=request.param)
        yield lambda: HerdrDriver(make_config())
        assert [(v.kind, v.errors) for v in emu.violations] == []
