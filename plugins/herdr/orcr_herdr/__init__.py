"""orcr's bundled herdr plugin: the ``herdr`` driver.

``orcr_herdr.testing`` holds a faithful herdr emulator for tests.
"""

import orcr_core


@orcr_core.hookimpl
def register_drivers(register):
    from orcr_herdr.driver import HerdrDriver

    register(HerdrDriver)
