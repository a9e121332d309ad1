"""The ``fake_clock`` fixture: orcr's clock seam (:mod:`orcr_core.common.clock`) on a
:class:`~orcr_core.common.clock.FakeClock` in the test process, for the duration of
a test. Timers, the timestamps the lifecycle writes and the monitor's deadlines move
only when the test calls ``fake_clock.advance(seconds)`` (``tests/test_timers_clock.py``).
A server process a test starts runs on the real clock: the seam is per process.
"""

from __future__ import annotations

import pytest

from orcr_core.common import clock


@pytest.fixture
def fake_clock():
    with clock.use(clock.FakeClock()) as fake:
        yield fake
