"""One end-to-end sandboxed agent: an echo agent (a real TUI in a real pane) runs a turn
inside bubblewrap and orcr still follows its turn end from the transcript it writes in
its data dir (bound back read-write); its pane runs the launcher and bubblewrap, and a
secret the server's environment holds does not reach it.

Planted: the agent's data dir not bound back (``write`` without ``policy["data_dir"]``)
-> the echo agent cannot write its transcript and the wait fails.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from orcr_core.kit.testing import until
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


PROBE = """
import json, os, socket, sys
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ESCAPED"
    except Exception as exc:
        out[name] = type(exc).__name__
home = os.environ["HOME"]
attempt("read_key", lambda: open(home + "/.ssh/id_ed25519").read())
attempt("write_outside", lambda: open(sys.argv[1], "w").write("x"))
attempt("orcr_socket", lambda: socket.socket(socket.AF_UNIX).connect(sys.argv[2]))
attempt("signal_server", lambda: os.kill(int(sys.argv[3]), 0))
out["secret_env"] = os.environ.get("SECRET_TOKEN")
out["orcr_id"] = bool(os.environ.get("ORCR_ID"))
json.dump(out, open("result.json", "w"))
"""


def test_sandboxed_command_agent_cannot_escape(live, short_tmp):
    """A sandboxed command agent in a real pane (tmux, herdr) tries its way out: the
    planted ~/.ssh key, a write to a folder outside (/var/tmp), orcr's socket, a signal
    to orcr's server, a secret in the server's environment. Each is refused; it still
    writes its own cwd and keeps its identity. Planted: ``--unshare-pid`` dropped ->
    signal_server says ESCAPED (the key is hidden twice, by the emptied home and the deny
    list: test_sandbox_escape plants each)."""
    outside = Path(tempfile.mkdtemp(prefix="orcr-sbx-out-", dir="/var/tmp"))
    home = outside / "home"  # outside /tmp, which the sandbox empties anyway
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    live.env.update(HOME=str(home), SECRET_TOKEN="s3cret")
    work = short_tmp / "work"
    work.mkdir()
    (work / "probe.py").write_text(PROBE)
    try:
        proc = live.start_server()
        argv = [sys.executable, "probe.py", str(outside / "x"), str(live.socket), str(proc.pid)]
        with live.sdk() as orcr:
            orcr.run(None, provider="command", path="sb/probe", cwd=str(work), argv=argv,
                     sandbox=True)  # fmt: skip

        def written():  # the probe writes it in place: whole once it parses
            try:
                return json.loads((work / "result.json").read_text())
            except (FileNotFoundError, ValueError):
                return None

        result = until(written, 30, "the probe's result")
        assert not (outside / "x").exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    assert result == {
        "read_key": "FileNotFoundError",
        "write_outside": "OSError",
        "orcr_socket": "FileNotFoundError",
        "signal_server": "ProcessLookupError",
        "secret_env": None,
        "orcr_id": True,
    }, result
