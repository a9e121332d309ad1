"""``orcr agent run|ls|get|kill|wait|send|read``, ``config get|set|unset`` and ``server
status`` run in the test's own process.

The CLI's fast path (``orcr_core/cli/fast.py``) runs these verbs without click, through
``orcr_core/cli/agent_verbs.py``: the same bodies the click commands run. Here it runs
in the pytest worker with its output captured, the way click's ``CliRunner`` runs a
command in datasette's and llm's tests. A CLI process costs ~70 ms of CPU (an
interpreter and its imports), and the suite started thousands of them.

:meth:`OrcrHome.run <orcr_testing.home.OrcrHome.run>` uses it only where the result
cannot differ from a process's:

- a server is listening for the home (its lock says so), so the verb starts none;
- the call brings no stdin and no environment of its own;
- the fast path takes the arguments, or they are one of :data:`CLICK_HERE` (``config
  get|set|unset``, ``server status``: click's own group runs them); help and every other
  command run as a process;
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
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout

#: commands click's path runs here too: each reads or writes files and asks the server,
#: and none starts a process, forks, prompts or takes the terminal
CLICK_HERE = (("config", "get"), ("config", "set"), ("config", "unset"), ("server", "status"))


def in_process(env: dict[str, str], args: list[str]) -> subprocess.CompletedProcess | None:
    """``orcr ARGS`` run here with ``env`` as the process's environment, while the
    home's server listens (the caller checks); None when it must run as a process."""
    from orcr_core.cli import fast

    if os.environ.get("ORCR_TEST_CLI_PROCESS"):
        return None
    quick = fast.parse(args) is not None
    if not quick and (tuple(args[:2]) not in CLICK_HERE or "--help" in args):
        return None
    if env.get("TZ") != os.environ.get("TZ"):
        return None  # local times: a process reads its zone at start, this one did not
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = _run(args, quick)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if code is None:  # the fast path declined after all: nothing ran, nothing printed
        return None
    return subprocess.CompletedProcess(["orcr", *args], code, out.getvalue(), err.getvalue())


def _run(args: list[str], quick: bool) -> int | None:
    """What ``python -m orcr_core.cli ARGS`` runs, its exit code as the process's: a
    ``SystemExit``'s, or 1 with the traceback on stderr, as the interpreter prints it."""
    from orcr_core.cli import fast

    try:
        if quick:
            return fast.run(args)
        from orcr_core.cli.app import cli, handle_errors

        with handle_errors():
            cli.main(args=args, prog_name="orcr", standalone_mode=True)
        return 0
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # sys.exit("why"), as the interpreter says it
        return 1
    except Exception:
        traceback.print_exc()
        return 1
