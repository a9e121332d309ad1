"""What ``orcr agent run|ls|get|kill|wait|send|read`` do once their arguments are
parsed: shared by the click commands (:mod:`orcr_core.cli.agent`) and the fast
path (:mod:`orcr_core.cli.fast`), so both print the same and exit the same.

Click-free: an expected failure is a :class:`~orcr_core.cli.codes.CliFailure`,
which the click commands raise as click's own exception.
"""

from __future__ import annotations

import json as jsonlib
import sys
import time

from orcr_core.cli.agent_show import (
    TURN_FAILURES,
    agent_table,
    printable,
    turn_failure,
    usage_line,
)
from orcr_core.cli.codes import CliFailure, ExitCode, echo
from orcr_core.cli.output import echo_results, sdk

#: back to the line's start and erase it (ECMA-48 EL): progress lines leave no residue
CLEAR_LINE = "\r\x1b[K"
#: a glob matching more agents than this asks first (--yes for scripts)
HANDFUL = 5


def run(prompt: str | None, json_: bool, sock: str | None = None, **opts) -> None:
    """Admit; print ``<path> <uuid>`` (or the JSON), a missing CLI's warning on stderr."""
    from orcr_core.sdk import check_prompt

    check_prompt(prompt)  # before connecting: an oversized prompt is never sent
    with sdk(sock) as orcr:  # no --provider: the server applies [agent] provider
        res = orcr.run(prompt, **opts)
    if res.get("warning"):  # admitted, but its provider's CLI is missing (orcr doctor)
        echo(f"warning: {res['warning']}", err=True)
    if json_:
        echo(jsonlib.dumps(res))
    else:
        echo(f"{res['path']} {res['uuid']}")


def ls(prefix: str | None, all_: bool, json_: bool, sock: str | None = None) -> None:
    with sdk(sock) as orcr:
        rows = orcr.list(prefix=prefix, all=all_)
    if json_:
        echo(jsonlib.dumps(rows))
    else:
        agent_table(rows)  # the header alone when there are none


def get(target: str, json_: bool, sock: str | None = None) -> None:
    with sdk(sock) as orcr:
        a = orcr.get(target)
    if json_:
        echo(jsonlib.dumps(a))
        return
    turns = a.pop("usage_turns", None) or []
    total = a.pop("usage", None)
    if a.get("waiting"):  # as agent ls says it: working (waiting: usage limit until 19:00)
        a["status"] += f" (waiting: {a.pop('waiting')})"
    if a.get("held"):  # as agent ls says it: queued (held: cap echo 3/3)
        a["status"] += f" (held: {a['held'].split(': ', 1)[0]})"
    for k, v in a.items():
        if v not in (None, False):
            echo(f"{k}: {v if not isinstance(v, dict) else jsonlib.dumps(v)}")
    echo(f"usage: {usage_line(total)}")  # "-": the provider reports no usage
    for t in turns:
        echo(f"  turn {t['turn']}: {usage_line(t)}")


def kill(target: str, json_: bool, confirm=None, sock: str | None = None) -> None:
    """Kill ``target``; ``confirm(orcr)`` first, when given (a glob's many matches)."""
    with sdk(sock) as orcr:
        if confirm is not None:
            confirm(orcr)
        res = orcr.kill(target)
    echo_results(res, json_)


def wait(
    target: str, until: str, timeout: float | None, json_: bool, sock: str | None = None
) -> None:
    from orcr_core.sdk import AgentEnded, WaitTimeout

    tty = sys.stderr.isatty()
    start = time.monotonic()

    def progress(a):
        if tty:  # \r and erase-line: a shorter status leaves nothing of a longer one
            echo(
                f"{CLEAR_LINE}{a['path']}: {a['status']} {time.monotonic() - start:5.1f}s",
                nl=False,
                err=True,
            )

    try:
        with sdk(sock) as orcr:
            a = orcr.wait(target, until=until, timeout=timeout, on_change=progress)
    except WaitTimeout as exc:
        raise CliFailure(str(exc), ExitCode.TIMEOUT) from None
    except AgentEnded as exc:
        raise CliFailure(str(exc), ExitCode.AGENT_FAILED) from None
    finally:
        if tty:
            echo(CLEAR_LINE, nl=False, err=True)
    failed = a["status"] == "idle" and a.get("turn_status") in TURN_FAILURES
    if json_:
        echo(jsonlib.dumps(a))
    else:
        echo(
            f"{a['path']} {a['status']}"
            + (f" {a['exit_reason']}" if a.get("exit_reason") else "")
            + (f" (turn {a['turn']} {a['turn_status']})" if failed else "")
        )
    if failed:
        raise CliFailure(turn_failure(a["path"], a["turn"], a), ExitCode.TURN_FAILED)


def send(target: str, prompt: str, timeout: float | None, sock: str | None = None) -> None:
    from orcr_core.sdk import check_prompt

    check_prompt(prompt)
    with sdk(sock) as orcr:
        a = orcr.send(target, prompt, timeout=timeout)
    echo(f"{a['path']} {a['status']} turn {a['turn']}")


def read(target: str, last: bool, json_: bool, sock: str | None = None) -> None:
    with sdk(sock) as orcr:
        r = orcr.read(target, last=last)
    failed = r.get("text") is None and r.get("turn_status") in TURN_FAILURES
    if json_:
        echo(jsonlib.dumps(r))
        if failed:
            raise SystemExit(ExitCode.TURN_FAILED)
        return
    if r.get("text") is not None:
        echo(printable(r["text"]))
    elif failed:
        raise CliFailure(turn_failure(r["path"], r.get("turn"), r), ExitCode.TURN_FAILED)
    elif r.get("screen") is not None:
        screen = printable(r["screen"]).splitlines()
        echo("\n".join(line.rstrip() for line in screen).rstrip("\n"))
    elif r.get("turn_status") == "completed":  # the model answered with no text at all
        raise CliFailure(f"agent {r['path']}: turn {r.get('turn')} completed with no answer text")
    else:
        raise CliFailure(f"agent {r['path']} has no final answer yet (status {r['status']})")
