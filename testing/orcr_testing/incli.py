"""``orcr agent run|ls|get|kill|wait|send|read`` run in the test's own process.

The CLI's fast path (``orcr_core/cli/fast.py``) runs these verbs without click, through
``orcr_core/cli/agent_verbs.py``: the same bodies the click commands run. Here it runs
in the pytest worker with its output captured, the way click's ``CliRunner`` runs a
command in datasette's and llm's tests. A CLI process costs ~70 ms of CPU (an
interpreter and its imports), and the suite started thousands of them.

:meth:`OrcrHome.run <orcr_testing.home.OrcrHome.run>` uses it only where the result
cannot differ from a process's:

- a server is listening for the home (its lock says so), so the verb starts none;
- the call brings no stdin and no environment of its own;
- the fast path takes the arguments (help, usage errors and every other command are
  click's path: a process);
- for the call, this process's environment is the home's (restored after), so a server
  the verb autostarts after all (the one listening died meanwhile) inherits what it
  would from a process.

A process stays the way to test the CLI as a program (its exit, its imports, its
autostart): ``run(..., process=True)``; ``ORCR_TEST_CLI_PROCESS=1`` makes every call
one.
"""

from __future__ import annotations

import io
import os
import subprocess
from contextlib import redirect_stderr, redirect_stdout


def in_process(env: dict[str, str], args: list[str]) -> subprocess.CompletedProcess | None:
    """``orcr ARGS`` run here with ``env`` as the process's environment, while the
    home's server listens (the caller checks); None when it must run as a process."""
    from orcr_core.cli import fast

    if os.environ.get("ORCR_TEST_CLI_PROCESS") or fast.parse(args) is None:
        return None
    if env.get("TZ") != os.environ.get("TZ"):
        return None  # local times: a process reads its zone at start, this one did not
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = fast.run(args)
            except SystemExit as exc:  # agent read --json of a failed turn
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if code is None:  # the fast path declined after all: nothing ran, nothing printed
        return None
    return subprocess.CompletedProcess(["orcr", *args], code, out.getvalue(), err.getvalue())
