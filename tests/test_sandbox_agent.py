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


def test_admission_fails_closed(orcr_home, short_tmp):
    """[sandbox] default with no engine: agent.run is refused (sandbox_unavailable, the
    install line) and nothing is queued; --no-sandbox still runs; a good engine records
    the sandbox in launch.json (planted: admission not asking the policy -> admitted)."""
    from orcr_core.sdk.client import ServerError

    orcr_home.config(
        '[driver]\nname = "test"\n[sandbox]\ndefault = true\nbwrap = "/nonexistent/bwrap"\n'
    )
    orcr_home.start_server()
    with orcr_home.sdk() as orcr:
        with pytest.raises(ServerError) as exc:
            orcr.run("hi", provider="echo", path="sb/no", cwd=str(short_tmp))
        assert exc.value.code == "sandbox_unavailable"
        assert "apt-get install bubblewrap" in exc.value.message
        assert orcr.list(all=True) == []
        ok = orcr.run("hi", provider="echo", path="sb/plain", cwd=str(short_tmp), sandbox=False)
        assert orcr.get(ok["uuid"])["sandbox"] is None
        orcr.kill(ok["uuid"])
