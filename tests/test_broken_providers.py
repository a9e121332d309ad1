"""A third-party provider that raises in a hook, returns garbage or hangs costs
only its own agent: that agent ends ``failed`` naming the provider and the hook,
and the server and every other agent carry on (issue 24 item 6).

The adapters are in tests/plugins/orcr_test_broken.py; each misbehaves in one
hook of the contract (orcr_core/pm/provider_guard.py holds them to it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_broken as broken  # noqa: E402
import orcr_test_driver as testdriver  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402

WORDS = {"raise": "exploded", "garbage": "returned", "hang": "no answer in 1s"}


@pytest.fixture
def home(orcr_home):
    orcr_home.env["ORCR_PLUGIN_MODULES"] = "orcr_test_driver,orcr_test_broken"
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 50\n'
        '[timings]\npoll_every = "50ms"\nprompt_confirm = "200ms"\nprovider_call = "1s"\n'
    )
    orcr_home.start_server()
    return orcr_home


def _run(home, provider: str, path: str) -> None:
    home.run("agent", "run", "--provider", provider, "--path", path, "go", check=True)


def test_each_broken_hook_fails_its_own_agent_and_nothing_else(home):
    _run(home, "testp", "ok/plain")
    _run(home, "brk-none-none", "ok/transcript")  # polled by the same monitor throughout
    for p in broken.PROVIDERS:
        _run(home, p.name, f"brk/{p.name.replace('-', '_')}")
    _run(home, "testp", "ok/late")  # admitted behind every broken one

    for p in broken.PROVIDERS:
        row = home.ended(f"brk/{p.name.replace('-', '_')}", timeout=60)
        assert row["exit_reason"] == "failed", row
        error = row["error"] or ""
        assert f"provider {p.name!r} broke in {p.hook}" in error, error
        assert WORDS[p.how] in error, error
        assert "Traceback" not in error

    # a launch hook that breaks is asked before any pane starts: none is left behind
    started = {entry[1] for entry in testdriver.read_state()["log"] if entry[0] == "start"}
    for p in broken.PROVIDERS:
        if p.hook in ("launch_argv", "launch_session"):
            assert f"brk/{p.name.replace('-', '_')}" not in started, p.name

    for path in ("ok/plain", "ok/transcript", "ok/late"):  # (started behind the others)
        until(lambda path=path: home.get(path)["status"] == "working", 30, what=f"{path} working")
    assert home.status()["pid"]  # the server still serves

    # the monitor still follows the healthy agents: a turn end is seen at once
    pane = home.get("ok/late")["pane_id"]
    testdriver.set_status(pane, "idle")
    until(lambda: home.get("ok/late")["status"] == "idle", 15, what="ok/late idle")
    _run(home, "testp", "ok/after")
    until(lambda: home.get("ok/after")["status"] == "working", 15, what="ok/after working")


def test_a_working_agent_whose_reader_breaks_ends_and_the_monitor_goes_on(home):
    """The monitor polls every working agent's transcript in one thread: a reader
    that raises, returns garbage or hangs mid-turn ends its own agent, and the
    others are followed as before (a hang holds the monitor up once, for
    ``timings.provider_call``)."""
    _run(home, "testp", "ok/a")
    _run(home, "brk-none-none", "ok/transcript")
    for p in broken.LATE:
        _run(home, p.name, f"brk/{p.how}")
    for p in broken.LATE:
        until(lambda p=p: home.get(f"brk/{p.how}")["status"] == "working", 30, what=p.name)
    broken.arm()
    for p in broken.LATE:
        row = home.ended(f"brk/{p.how}", timeout=30)
        assert f"provider {p.name!r} broke in poll" in row["error"], row
        assert WORDS[p.how] in row["error"], row
    assert home.get("ok/transcript")["status"] == "working"
    testdriver.set_status(home.get("ok/a")["pane_id"], "idle")
    until(lambda: home.get("ok/a")["status"] == "idle", 15, what="ok/a idle")
