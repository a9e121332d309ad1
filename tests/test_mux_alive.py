"""orcr's own multiplexer is kept alive (issue 10 item 2): when the herdr server
orcr owns is gone, the server starts it again (with backoff) before any promotion;
while it cannot, queued rows stay queued with the reason in ``server status`` and
``agent get`` instead of being promoted into a dead driver and failing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from orcr_core import dirs
from orcr_core.kit.testing import until


def _herdr_pids(bindir) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-f", f"{bindir}/herdr --session"], capture_output=True, text=True
    ).stdout.split()
    return [int(p) for p in out]


def _herdr_pid(sock, bindir) -> int | None:
    """The pid of orcr's herdr server when it answers on ``sock``, else None.

    The one herdr process before and after a ping that got an answer: a connect that
    got in (``raw`` swallows a read that fails) or a pid seen at another instant is
    not enough. A stopping herdr still accepts for a moment while a new one starts
    and exits (its own start finds the old one listening), and that new pid, seen
    once, was taken for a herdr that answers (the test then failed: connection
    refused on the next request)."""
    from orcr_testing.herdr.wire import raw

    before = _herdr_pids(bindir)
    if len(before) != 1:
        return None
    try:
        reply = raw(sock, json.dumps({"id": "p", "method": "ping", "params": {}}) + "\n", 2.0)
    except OSError:
        return None
    if b'"p"' not in reply or _herdr_pids(bindir) != before:
        return None
    return before[0]


def _broken_herdr(bindir) -> None:
    """A ``herdr`` that exits at once: orcr's restarts of its server fail."""
    path = bindir / "herdr"
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(3)\n")
    path.chmod(0o755)


def test_owned_herdr_restarted_and_queue_held_while_it_is_down(orcr_home, short_tmp):
    from orcr_testing.herdr.shim import write_herdr_shim
    from orcr_testing.herdr.wire import raw

    bindir = short_tmp / "bin"
    write_herdr_shim(bindir, env={"ORCR_HERDR_EMU_SHELL": "/bin/sh"})
    xdg = short_tmp / "xdg"
    orcr_home.env.update(
        {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "XDG_CONFIG_HOME": str(xdg)}
    )
    orcr_home.config('[driver]\nname = "herdr"\n[timings]\npoll_every = "50ms"\n')
    sock = xdg / "herdr" / "sessions" / dirs.mux_name() / "herdr.sock"
    try:
        orcr_home.start_server()
        orcr_home.run("agent", "run", "-p", "echo", "--path", "k/one", "hi", check=True)
        orcr_home.run("agent", "wait", "k/one", "--timeout", "30s", check=True)
        assert orcr_home.status()["driver"]["healthy"] is True

        # herdr goes away with nothing queued: the monitor starts it again by itself
        first = _herdr_pid(sock, bindir)
        assert first is not None
        raw(sock, json.dumps({"id": "stop", "method": "server.stop", "params": {}}) + "\n")
        until(lambda: _herdr_pid(sock, bindir) not in (None, first), 30, what="herdr started again")
        assert orcr_home.status()["queue_depth"] == 0

        # herdr goes away and cannot be started again for now
        _broken_herdr(bindir)
        raw(sock, json.dumps({"id": "stop", "method": "server.stop", "params": {}}) + "\n")
        until(lambda: not sock.exists(), 15, what="herdr stopped")
        st = until(lambda: (s := orcr_home.status())["driver"]["healthy"] is False and s)
        assert "herdr" in st["driver"]["error"], st["driver"]

        out = orcr_home.run("agent", "run", "-p", "echo", "--path", "k/two", "later", check=True)
        uuid = out.stdout.split()[1]
        held = until(lambda: orcr_home.get("k/two").get("held"), 15, what="a held reason")
        assert "multiplexer" in held and "herdr" in held, held
        st = orcr_home.status()
        assert st["queue_depth"] == 1 and "multiplexer" in st["held"], st
        text = orcr_home.run("server", "status", check=True).stdout
        assert "held: multiplexer" in text and "ERROR" in text, text
        doctor = orcr_home.run("doctor").stdout
        assert "multiplexer: the server's herdr is unreachable" in doctor, doctor
        # several failed restarts later, still queued: never promoted into a dead driver
        until(lambda: "could not be started again" in orcr_home.server_log(), 15)
        assert orcr_home.get("k/two")["status"] == "queued"
        assert not [e for e in orcr_home.events(uuid) if e["kind"] == "agent.status"], (
            "k/two was promoted while herdr was down"
        )

        # herdr can start again: orcr restarts it and the queue moves
        write_herdr_shim(bindir, env={"ORCR_HERDR_EMU_SHELL": "/bin/sh"})
        orcr_home.run("agent", "wait", "k/two", "--timeout", "60s", check=True)
        assert orcr_home.run("agent", "read", "k/two", check=True).stdout == "later\n"
        st = orcr_home.status()
        assert st["driver"]["healthy"] is True and st["driver"]["error"] is None
        assert st["held"] is None
        assert "multiplexer: the server's herdr answers" in orcr_home.run("doctor").stdout
    finally:
        orcr_home.stop_server()
        pids = subprocess.run(
            ["pgrep", "-f", f"{bindir}/herdr"], capture_output=True, text=True
        ).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_tmux_server_gone_is_started_again_for_the_next_agent(live):
    """tmux: the server orcr owns is killed; the next promotion starts it again."""
    if live.mux.kind != "tmux":
        return  # the herdr case is the test above (orcr owns that herdr server)
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "t/one", "hi", check=True)
    live.run("agent", "wait", "t/one", "--timeout", "30s", check=True)
    subprocess.run(["tmux", "-S", str(live.mux.socket), "kill-server"], check=True)
    live.run("agent", "run", "-p", "echo", "--path", "t/two", "again", check=True)
    live.run("agent", "wait", "t/two", "--timeout", "60s", check=True)
    assert live.run("agent", "read", "t/two", check=True).stdout == "again\n"
    st = live.status()
    assert st["driver"]["healthy"] is True and st["held"] is None
