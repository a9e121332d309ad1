"""orcr's bundled herdr plugin: the ``herdr`` driver.

The faithful herdr emulator for tests is ``orcr_testing.herdr``, in the test
distribution (testing/), not in orcr's wheel.
"""

import orcr_core


@orcr_core.hookimpl
def register_drivers(register):
    from orcr_herdr.driver import HerdrDriver

    register(HerdrDriver)
