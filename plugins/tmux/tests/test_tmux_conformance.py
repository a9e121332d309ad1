"""The tmux driver runs the multiplexer driver suite (orcr_testing.conformance), as a
third party's driver does: a real tmux server on the test's own socket.

Planted: close ignoring the marks (its ``if pane.instance ...`` made ``if False``) ->
test_marks_are_reported_and_guard_every_close fails."""

from __future__ import annotations

import pytest
from orcr_testing.conformance import DriverSuite
from orcr_tmux import TmuxDriver

from .conftest import make_config


class TestTmuxDriver(DriverSuite):
    @pytest.fixture
    def make_driver(self, socket_path):
        def make() -> TmuxDriver:
            d = TmuxDriver(make_config(socket_path))
            d.prompt_delay = 0.3
            return d

        return make
