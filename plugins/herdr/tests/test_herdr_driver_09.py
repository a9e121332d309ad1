"""The driver on herdr 0.9 (protocol 22) and 0.8: what differs between them."""

from __future__ import annotations

import pytest
from orcr_herdr.client import HerdrClient
from orcr_herdr.driver import HerdrDriver

from orcr_core.contracts import DriverError


@pytest.mark.parametrize("protocol", [20, 22])
def test_replies_are_matched_by_id(make_emulator, config_factory, protocol):
    emu = make_emulator(protocol=protocol)
    driver = HerdrDriver(config_factory())

    def stray(method, reply):
        reply["id"] = "someone-else"
        return reply

    emu.corrupt_next_reply(stray)
    with pytest.raises(DriverError) as exc:
        driver.request("workspace.list", {})
    assert exc.value.code == "bad_reply" and "someone-else" in str(exc.value)
    with pytest.raises(DriverError) as exc:  # an error reply: "" on 0.8, the id on 0.9
        driver.request("pane.get", {"pane_id": "w9:p9"})
    assert exc.value.code == "pane_not_found"
    # a rejected subscription entry: 0.8's probe id, 0.9's request id
    with pytest.raises(DriverError) as exc:
        next(HerdrClient(emu.socket_path).subscribe([{"type": "pane.output_matched",
             "pane_id": "w9:p9", "source": "visible", "match": {"type": "substring",
             "value": "x"}}]))  # fmt: skip
    assert exc.value.code == "pane_not_found"


def test_removed_methods_are_unknown_method_on_22(make_emulator, config_factory):
    make_emulator(protocol=22)
    with pytest.raises(DriverError) as exc:
        HerdrDriver(config_factory()).request("pane.graphics.info", {"pane_id": "w1:p1"})
    assert exc.value.code == "unknown_method" and not exc.value.retryable
