"""One end-to-end sandboxed agent: an echo agent (a real TUI in a real pane) runs a turn
inside bubblewrap and orcr still follows its turn end from the transcript it writes in
its data dir (bound back read-write); its pane runs the launcher and bubblewrap, and a
secret the server's environment holds does not reach it.

Planted: the agent's data dir not bound back (``write`` without ``policy["data_dir"]``)
-> the echo agent cannot write its transcript and the wait fails.
"""

from __future__ import annotations

import pytest

from orcr_core.sandbox import bwrap, enter

pytestmark = pytest.mark.skipif(
    bwrap.unavailable() is not None, reason=f"no sandbox engine: {bwrap.unavailable()}"
)


def test_sandboxed_echo_agent_turn(live, short_tmp):
    live.env["SECRET_TOKEN"] = "s3cret"
    live.start_server()
    work = short_tmp / "work"
    work.mkdir()
    with live.sdk() as orcr:
        uuid = orcr.run(
            "hello from the box", provider="echo", path="sb/one", cwd=str(work), sandbox=True
        )["uuid"]
        agent = orcr.wait("sb/one", timeout=30)
        assert agent["turn_status"] == "completed"
        assert orcr.read("sb/one")["text"].strip() == "hello from the box"
        assert orcr.get("sb/one")["sandbox"]["engine"] == "bwrap"
    started = [e for e in live.events(uuid) if e["kind"] == "pane.start_requested"]
    argv = started[0]["data"]["argv"]
    assert argv[1:4] == ["-I", "-S", enter.__file__] and "--unshare-net" in argv
    assert "SECRET_TOKEN" not in argv
