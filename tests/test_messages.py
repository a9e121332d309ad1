"""Issue 20 item 32: messages say what can help. agent read on a queued agent reads
cleanly; agent read of a command agent prints its screen; agent send to an ended
or lost agent points at resume or a new agent, never at agent wait."""

from __future__ import annotations

from orcr_core.kit.testing import until


def test_read_on_a_queued_agent_says_its_first_turn_has_not_started(server):
    server.run("config", "set", "concurrency.testp", "1", check=True)
    server.run("agent", "run", "-p", "testp", "--path", "m/one", "hi", check=True)
    server.run("agent", "run", "-p", "testp", "--path", "m/two", "hi", check=True)
    assert server.get("m/two")["status"] == "queued"
    r = server.run("agent", "read", "m/two")
    assert r.returncode == 8, r
    assert "is queued: its first turn has not started yet, so there is no answer" in r.stderr
    assert "has not started is still" not in r.stderr and "orcr agent wait m/two" in r.stderr


def test_read_of_a_command_agent_prints_its_screen_while_it_runs(server):
    server.run(
        "agent", "run", "-p", "command", "--path", "m/cmd", "--prompt", "go", "--", "sh", check=True
    )
    until(lambda: server.get("m/cmd")["status"] == "working", 30, what="m/cmd working")
    r = server.run("agent", "read", "m/cmd")
    assert r.returncode == 0 and "test pane ready" in r.stdout and "go" in r.stdout, r


def test_send_to_an_ended_agent_points_at_run_or_resume(server):
    server.run("agent", "run", "-p", "testp", "--path", "m/k", check=True)
    server.run("agent", "wait", "m/k", "--timeout", "30s", check=True)
    server.run("agent", "kill", "m/k", check=True)
    r = server.run("agent", "send", "m/k", "hello")
    assert r.returncode == 1 and "[not_idle]" in r.stderr, r
    assert "ended (killed) and takes no prompt" in r.stderr and "orcr agent run" in r.stderr
    assert "agent wait" not in r.stderr
