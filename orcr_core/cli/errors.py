"""Exit codes and error printing for the CLI."""

from __future__ import annotations

import contextlib
import errno
import sys
from enum import IntEnum

import click


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


class OrcrCliError(click.ClickException):
    def __init__(self, message: str, code: int = ExitCode.ERROR):
        super().__init__(message)
        self.exit_code = int(code)


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


@contextlib.contextmanager
def handle_errors():
    from orcr_core.client import ServerError

    try:
        yield
    except ServerError as exc:
        click.echo(f"Error: {exc.message} [{exc.code}]", err=True)
        sys.exit(int(CODE_MAP.get(exc.code, ExitCode.ERROR)))
    except BrokenPipeError:  # our stdout's reader went away (orcr agent ls | head): quietly
        sys.exit(ExitCode.ERROR)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        click.echo(
            f"Error: disk full{where} ({exc.strerror}): the command stopped there; "
            "free some space and run it again",
            err=True,
        )
        sys.exit(ExitCode.ERROR)
