"""A server that a loop run's ``orcr`` call started outlives the run.

The chaos soak (seed 42, herdr) saw a server vanish between a run's
``run.signal_requested`` and its ``run.signal_applied``, with nothing in its log.
The server had been down when the run's job called ``orcr agent run``, which started
one: a daemon the command started, reparented to the run's supervisor (a child
subreaper) when the CLI exited, and SIGKILLed as a process the command left behind
when the run ended, taking its multiplexer and agents with it.
"""

from __future__ import annotations

import loop_helpers
from loop_helpers import PY, _alive, _create, _ended, _start

from orcr_core.kit.testing import until
from orcr_core.server import lockfile

loops = loop_helpers.loops  # the fixture


def _holder(home):
    h = lockfile.holder(home.path / "run" / "server.lock")
    return h.pid if h is not None and h.listening else None


def test_a_server_a_run_started_outlives_the_run(loops):
    first = loops.proc.pid
    cli = f"{PY} -m orcr_core.cli"
    # the server goes away under the run; the run's next orcr call starts another
    script = f"{cli} server stop; {cli} agent ls > /dev/null && echo listed"
    _create(loops, "restarts", "0 0 1 1 *", "--", "sh", "-c", script)
    path = _start(loops, "restarts")
    second = until(lambda: (pid := _holder(loops)) not in (None, first) and pid, 60,
                   what="a server started by the run")  # fmt: skip
    run = until(lambda: _ended(loops, path), 60, what="the run to end")
    assert run["status"] == "ok", run
    assert _alive(second), "the run's supervisor killed the server the run had started"
    assert _holder(loops) == second
    logs = loops.run("loop", "logs", "restarts", "--run", path.split("/")[1], "--source", "run")
    assert "listed" in logs.stdout and "outside its group" not in logs.stdout, logs.stdout
    loops.run("server", "stop", check=True)
