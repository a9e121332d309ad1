"""Exit codes, error lines and output for the CLI, without click.

The hot verbs' fast path (:mod:`orcr_core.cli.fast`) prints through these and
never imports click; :mod:`orcr_core.cli.errors` builds click's exceptions on them.
"""

from __future__ import annotations

import errno
import re
import sys
from enum import IntEnum


class ExitCode(IntEnum):
    """orcr's exit codes (documented in docs/cli.md)."""

    OK = 0
    ERROR = 1  #: an expected failure (a full disk too): the message says what and how to fix it
    USAGE = 2  #: bad invocation (click's own code)
    NOT_FOUND = 3  #: no such agent
    TIMEOUT = 4  #: ``agent wait --timeout`` elapsed
    #: the waited-for agent ended badly (failed, timeout, lost, canceled), or
    #: ended at all while ``agent wait`` waited for idle
    AGENT_FAILED = 5
    NO_SERVER = 6  #: the server could not be reached or started
    #: the turn ended without an answer: it errored or was interrupted (``agent wait``,
    #: ``agent read``; the error is printed)
    TURN_FAILED = 7
    #: ``agent read``: the agent's turn is still running, so there is no answer yet
    #: (``--last`` reads the previous one)
    TURN_RUNNING = 8


CODE_MAP = {
    "not_found": ExitCode.NOT_FOUND,
    "wait_timeout": ExitCode.TIMEOUT,
    "agent_ended": ExitCode.AGENT_FAILED,
    "server_not_running": ExitCode.NO_SERVER,
    "server_start_failed": ExitCode.NO_SERVER,
    "socket_missing": ExitCode.NO_SERVER,
    "server_stopping": ExitCode.NO_SERVER,
    "connection_closed": ExitCode.NO_SERVER,
    "server_not_answering": ExitCode.NO_SERVER,
    "store_corrupted": ExitCode.NO_SERVER,
    "turn_running": ExitCode.TURN_RUNNING,
}


class CliFailure(Exception):
    """A verb's expected failure: ``Error: <message>`` on stderr, exit ``code``.
    The click commands raise it as :class:`orcr_core.cli.errors.OrcrCliError`."""

    def __init__(self, message: str, code: int = ExitCode.ERROR):
        super().__init__(message)
        self.message = message
        self.code = int(code)


#: what click.echo strips from text bound for something other than a terminal
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def echo(message: str = "", nl: bool = True, err: bool = False) -> None:
    """``click.echo`` for text: click's own once click is loaded (its test runner,
    its colour switch); else the same bytes, written here: escape sequences
    stripped unless the stream is a terminal, then flushed."""
    click = sys.modules.get("click")
    stream = sys.stderr if err else sys.stdout
    if click is not None or stream is None or _misconfigured(stream):
        import click

        click.echo(message, nl=nl, err=err)
        return
    out = str(message) + ("\n" if nl else "")
    if not stream.isatty():
        out = _ANSI.sub("", out)
    stream.write(out)
    stream.flush()


def _misconfigured(stream) -> bool:
    """A stream click would re-wrap (an ASCII encoding): let click print to it."""
    enc = (getattr(stream, "encoding", None) or "ascii").lower().replace("_", "-")
    return enc in ("ascii", "us-ascii", "ansi-x3.4-1968", "646")


def error_exit(exc: BaseException) -> int | None:
    """Print what orcr says about ``exc`` and return its exit code; None when ``exc``
    is not one orcr reports (the caller re-raises it)."""
    from orcr_core.sdk.client import ServerError

    if isinstance(exc, ServerError):
        echo(f"Error: {exc.message} [{exc.code}]", err=True)
        return int(CODE_MAP.get(exc.code, ExitCode.ERROR))
    if isinstance(exc, BrokenPipeError):  # our stdout's reader went away (ls | head): quietly
        return int(ExitCode.ERROR)
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" writing {exc.filename}" if exc.filename else ""
        echo(
            f"Error: disk full{where} ({exc.strerror}): the command stopped there; "
            "free some space and run it again",
            err=True,
        )
        return int(ExitCode.ERROR)
    return None
