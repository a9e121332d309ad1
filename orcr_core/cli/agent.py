"""``orcr agent``: run, ls, get, wait, send, read, kill, resume, attach."""

from __future__ import annotations

import json as jsonlib
import os
import re
import sys
import time

import click

from orcr_core.cli.errors import ExitCode, OrcrCliError
from orcr_core.cli.output import echo_results, echo_table, sdk

#: back to the line's start and erase it (ECMA-48 EL): progress lines leave no residue
CLEAR_LINE = "\r\x1b[K"


def _stdin_prompt() -> str:
    """A prompt from stdin, read as bytes: bytes that are not UTF-8 are kept (as
    surrogates) so the check refuses them naming their offset, whatever the locale."""
    return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")


def _duration(ctx, param, value, limit: float | None = None):
    """A --timeout: a duration over 0s (and at most ``limit``), else a usage error (exit 2)."""
    if value is None:
        return None
    from orcr_core.config import ConfigError, parse_duration

    allowed = "more than 0s" + (f" and at most {_human(limit)}" if limit else "")
    try:
        seconds = float(value) if _NUMBER.fullmatch(value) else parse_duration(value, param.name)
    except ConfigError:
        raise click.BadParameter(
            f"{value!r} is not a duration: give a number with a unit (ms, s, m, h, d), "
            f"e.g. 30s, 5m, 1h30m; {allowed}"
        ) from None
    if seconds <= 0:
        raise click.BadParameter(f"{value!r} is too short: a timeout is {allowed}, e.g. 30s")
    if limit is not None and seconds > limit:
        raise click.BadParameter(f"{value!r} is over the limit: a turn timeout is {allowed}")
    return seconds


_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # a bare number is seconds


def _turn_timeout(ctx, param, value):
    from orcr_core.protocol import MAX_TURN_TIMEOUT

    return _duration(ctx, param, value, limit=MAX_TURN_TIMEOUT)


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


@click.group()
def agent():
    """Run and manage agents.

    A TARGET is a uuid or a path. Inside a scope ($ORCR_PATH set, as in a loop run
    or an agent) a path is relative to it, as run --path places one; one that
    already starts with the scope is taken as is, and a leading / names a path
    from the top (/other/agent).
    """


@agent.command(name="run", context_settings={"ignore_unknown_options": True})
@click.option("--provider", "-p", help="Provider adapter (default: [agent] provider, else claude).")
@click.option("--path", "path_", metavar="PATH", help="Agent path, relative to $ORCR_PATH.")
@click.option("--name", metavar="NAME", help="Last path segment only (one segment).")
@click.option("--cwd", type=click.Path(file_okay=False, exists=True), help="Working directory.")
@click.option(
    "--timeout",
    callback=_turn_timeout,
    help="End the agent if a turn runs longer (30m, 2h; at most 7d).",
)
@click.option(
    "--prompt", "prompt_opt", metavar="TEXT", help="The first prompt (for --provider command)."
)
@click.option("--worktree", is_flag=True, help="Its own checkout of the repository --cwd is in.")
@click.option("--branch", metavar="NAME", help="--worktree's new branch (default orcr/<path>).")
@click.option("--base", metavar="REV", help="--worktree's start (default: HEAD's commit).")
@click.option("--model", metavar="MODEL", help="This run's model (claude, codex).")
@click.option(
    "--arg",
    "extra",
    metavar="ARG",
    multiple=True,
    help="One more argument for the provider's CLI (repeatable; claude, codex).",
)
@click.option("--json", "json_", is_flag=True, help="Print the admission as JSON.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def agent_run(
    provider, path_, name, cwd, timeout, prompt_opt, worktree, branch, base, model, extra,
    json_, args,
):  # fmt: skip
    """Admit an agent and print "<path> <uuid>" at once.

    ARGS is the first prompt ('-' reads it from stdin). For --provider command,
    ARGS is the argv to run (after --), and --prompt gives a first prompt.
    A prompt is UTF-8 text: other bytes are refused (invalid_prompt, with the offset).
    The agent waits in the FIFO queue until both caps have room; this command
    never waits for a slot.

    --worktree gives the agent a git worktree on a new branch (or a jj
    workspace) made when it starts; it is removed when the agent ends unless it
    holds changes or commits on no other branch (orcr worktree ls).
    """
    argv = None
    if provider == "command":
        argv = list(args) or None
        prompt = prompt_opt
    else:
        if len(args) > 1:
            raise click.UsageError(
                f"give the prompt as one argument (quote it); got {len(args)}: {' '.join(args)[:60]!r}"
            )
        prompt = args[0] if args else prompt_opt
        if prompt == "-":
            prompt = _stdin_prompt()
    from orcr_core.sdk import check_prompt

    check_prompt(prompt)  # before connecting: an oversized prompt is never sent
    with sdk() as orcr:  # no --provider: the server applies [agent] provider
        res = orcr.run(
            prompt,
            provider=provider,
            path=path_,
            name=name,
            cwd=cwd,
            timeout=timeout,
            argv=argv,
            worktree=worktree,
            branch=branch,
            base=base,
            model=model,
            args=list(extra) if extra else None,
        )
    if json_:
        click.echo(jsonlib.dumps(res))
    else:
        click.echo(f"{res['path']} {res['uuid']}")


def _age(iso: str | None) -> str:
    if not iso:
        return "-"
    from datetime import datetime

    secs = time.time() - datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"


def tokens_text(u: dict | None) -> str:
    """A token count for a column: ``12.3k``; ``-`` when no usage was reported."""
    if not u:
        return "-"
    n = u["tokens"]
    return str(n) if n < 10_000 else f"{n / 1000:.1f}k" if n < 1_000_000 else f"{n / 1e6:.1f}M"


def usage_line(u: dict | None) -> str:
    if not u:
        return "-"
    parts = [f"{u['tokens']} tokens"]
    parts.append(
        f"in {u['input']} out {u['output']} cache-read {u['cache_read']} "
        f"cache-write {u['cache_write']}"
    )
    if u.get("model"):
        parts.append(u["model"])
    return " · ".join(parts)


def _table(rows: list[dict]) -> None:
    cols = ("PATH", "STATUS", "PROVIDER", "TOKENS", "AGE", "UUID")
    data = []
    for a in rows:
        status = a["status"] + (f" ({a['exit_reason']})" if a["exit_reason"] else "")
        if a.get("stalled"):  # a flag beside the status, not a status of its own
            status += " (stalled)"
        if a.get("blocked"):
            status += " (blocked)"
        if a.get("held"):  # queued, and the queue waits: "memory" or "multiplexer"
            status += f" (held: {a['held'].split(':', 1)[0]})"
        if a.get("parked"):  # idle in the parking area: a prompt or an attach brings it back
            status += " (parked)"
        tokens = tokens_text(a.get("usage"))
        data.append((a["path"], status, a["provider"], tokens, _age(a["created_at"]), a["uuid"]))
    widths = [max([len(c)] + [len(r[i]) for r in data]) for i, c in enumerate(cols)]
    for r in [cols, *data]:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    for a in rows:  # what it waits for, on a line of its own (a reason is long)
        if a.get("blocked"):
            click.echo(f"blocked {a['path']}: {a['blocked']}")


def _unmanaged_table(rows: list[dict]) -> None:
    cols = ("SESSION", "TERMINAL", "KIND", "STATUS", "PANE", "CWD", "LABEL", "AGE")
    data = [
        (
            u["session"],
            u["terminal_id"],
            u["kind"],
            u["status"],
            u["pane_id"] or "-",
            u["cwd"] or "-",
            u["label"] or "-",
            _age(u["discovered_at"]),
        )
        for u in rows
    ]
    echo_table(cols, data)


@agent.command(name="ls")
@click.argument("prefix", required=False)
@click.option("--all", "all_", is_flag=True, help="Include ended agents.")
@click.option(
    "--unmanaged",
    is_flag=True,
    help="List the agents herdr detects in your other herdr sessions instead "
    "(orcr never acts on them).",
)
@click.option("--json", "json_", is_flag=True, help="JSON rows.")
def agent_ls(prefix, all_, unmanaged, json_):
    """List active agents (under PREFIX, a path).

    With --unmanaged: the agents herdr detects in your other herdr sessions,
    keyed by session and terminal id, as of the last reconciliation pass. orcr
    lists them and never sends to, kills or collects one. The tmux driver
    reports none.
    """
    if unmanaged and prefix:
        raise click.UsageError(
            f"PREFIX ({prefix!r}) is an orcr path; unmanaged agents have none: "
            "give --unmanaged alone (filter --json rows by session)"
        )
    with sdk() as orcr:
        rows = orcr.unmanaged(all=all_) if unmanaged else orcr.list(prefix=prefix, all=all_)
    if json_:
        click.echo(jsonlib.dumps(rows))
    elif unmanaged:
        _unmanaged_table(rows)
    else:
        _table(rows)  # the header alone when there are none


@agent.command(name="get")
@click.argument("target")
@click.option("--json", "json_", is_flag=True)
def agent_get(target, json_):
    """Show one agent (PATH or UUID)."""
    with sdk() as orcr:
        a = orcr.get(target)
    if json_:
        click.echo(jsonlib.dumps(a))
        return
    turns = a.pop("usage_turns", None) or []
    total = a.pop("usage", None)
    for k, v in a.items():
        if v not in (None, False):
            click.echo(f"{k}: {v if not isinstance(v, dict) else jsonlib.dumps(v)}")
    click.echo(f"usage: {usage_line(total)}")  # "-": the provider reports no usage
    for t in turns:
        click.echo(f"  turn {t['turn']}: {usage_line(t)}")


#: a glob matching more agents than this asks first (--yes for scripts)
HANDFUL = 5


def _confirm_many(orcr, target: str, yes: bool) -> None:
    from orcr_core import paths

    if yes or not paths.is_glob(target):
        return
    matches = orcr.kill_matches(target)
    if len(matches) <= HANDFUL:
        return
    shown = ", ".join(m["path"] for m in matches[:HANDFUL])
    what = f"{target!r} matches {len(matches)} agents ({shown}, ...)"
    if not sys.stdin.isatty():
        raise OrcrCliError(
            f"{what}; killing more than {HANDFUL} at once needs --yes (no terminal to ask on)",
            ExitCode.USAGE,
        )
    if not click.confirm(f"{what}. Kill them all?", err=True):
        raise OrcrCliError("nothing was killed")


@agent.command(name="kill")
@click.argument("target")
@click.option(
    "--yes", "-y", is_flag=True, help=f"Kill a glob's matches without asking (over {HANDFUL})."
)
@click.option("--json", "json_", is_flag=True)
def agent_kill(target, yes, json_):
    """Kill agents by PATH, UUID or GLOB ('review/*', 'nightly/**').

    Queued agents end canceled; starting ones are canceled between pipeline
    steps; working and idle ones end killed. A glob matching more than 5
    agents asks first on a terminal; without one it needs --yes.
    """
    with sdk() as orcr:
        _confirm_many(orcr, target, yes)
        res = orcr.kill(target)
    echo_results(res, json_)


@agent.command(name="resume")
@click.argument("target")
@click.option("--json", "json_", is_flag=True)
def agent_resume(target, json_):
    """Start a lost agent (or one that ended lost or exited) again, in its own session.

    It keeps its PATH, uuid and transcript, is queued and promoted under the
    caps like any start, and its provider continues the recorded session
    (Claude Code --resume, Codex resume). Prints <path> <uuid>.
    """
    with sdk() as orcr:
        a = orcr.resume(target)
    if json_:
        click.echo(jsonlib.dumps(a, indent=2))
        return
    click.echo(f"{a['path']} {a['uuid']}")


@agent.command(name="wait")
@click.argument("target")
@click.option("--until", type=click.Choice(["idle", "ended"]), default="idle", show_default=True)
@click.option("--timeout", callback=_duration, help="Give up after this long (exit 4).")
@click.option("--json", "json_", is_flag=True)
def agent_wait(target, until, timeout, json_):
    """Wait until the agent's turn ends (idle) or it ends.

    Exits 4 on timeout, 5 when the agent ends badly (failed, timeout, lost,
    canceled) and 7 when it is idle after a turn that errored or was
    interrupted (the error is printed). On a terminal, shows the status and
    elapsed time while waiting.
    """
    from orcr_core.sdk import AgentEnded, WaitTimeout

    tty = sys.stderr.isatty()
    start = time.monotonic()

    def progress(a):
        if tty:  # \r and erase-line: a shorter status leaves nothing of a longer one
            click.echo(
                f"{CLEAR_LINE}{a['path']}: {a['status']} {time.monotonic() - start:5.1f}s",
                nl=False,
                err=True,
            )

    try:
        with sdk() as orcr:
            a = orcr.wait(target, until=until, timeout=timeout, on_change=progress)
    except WaitTimeout as exc:
        raise OrcrCliError(str(exc), ExitCode.TIMEOUT) from None
    except AgentEnded as exc:
        raise OrcrCliError(str(exc), ExitCode.AGENT_FAILED) from None
    finally:
        if tty:
            click.echo(CLEAR_LINE, nl=False, err=True)
    failed = a["status"] == "idle" and a.get("turn_status") in TURN_FAILURES
    if json_:
        click.echo(jsonlib.dumps(a))
    else:
        click.echo(
            f"{a['path']} {a['status']}"
            + (f" {a['exit_reason']}" if a.get("exit_reason") else "")
            + (f" (turn {a['turn']} {a['turn_status']})" if failed else "")
        )
    if failed:
        raise OrcrCliError(_turn_failure(a["path"], a["turn"], a), ExitCode.TURN_FAILED)


#: how a turn ends without an answer
TURN_FAILURES = ("errored", "interrupted")


def _turn_failure(path: str, turn, r: dict) -> str:
    why = r.get("turn_error") or r.get("error")
    words = (
        f"agent {path}: turn {turn} {r['turn_status']}"
        if turn
        else f"agent {path}: the last turn {r['turn_status']}"
    )
    return words + (f": {why}" if why else "; it has no answer")


@agent.command(name="send")
@click.argument("target")
@click.argument("prompt", required=False)
@click.option(
    "--timeout",
    callback=_turn_timeout,
    help="End the agent if this turn runs longer (at most 7d).",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    help="Press a key in the agent's pane instead of sending a prompt (repeatable, in "
    "order): enter, escape, up, down, tab, ctrl+c, or one character.",
)
def agent_send(target, prompt, timeout, keys):
    """Start the agent's next turn with PROMPT ('-' reads stdin). Needs an idle agent.

    PROMPT is UTF-8 text (other bytes: invalid_prompt). A prompt the multiplexer
    fails to type ends the turn errored, and the agent is idle again.

    With --key (and no PROMPT) presses keys in the pane of a starting, working
    or idle agent instead, and starts no turn: answer a dialog the agent is
    blocked on (orcr agent ls shows it), e.g. --key down --key enter.
    """
    if keys:
        if prompt is not None or timeout is not None:
            raise OrcrCliError(
                "--key presses keys only: give no PROMPT or --timeout with it", ExitCode.USAGE
            )
        with sdk() as orcr:
            r = orcr.keys(target, list(keys))
        click.echo(f"{r['path']} keys {' '.join(r['keys'])}")
        return
    if prompt is None:
        raise OrcrCliError("missing PROMPT (or --key KEY to press keys)", ExitCode.USAGE)
    if prompt == "-":
        prompt = _stdin_prompt()
    from orcr_core.sdk import check_prompt

    check_prompt(prompt)
    with sdk() as orcr:
        a = orcr.send(target, prompt, timeout=timeout)
    click.echo(f"{a['path']} {a['status']} turn {a['turn']}")


@agent.command(name="read")
@click.argument("target")
@click.option("--last", is_flag=True, help="While a turn runs, read the previous turn's answer.")
@click.option("--json", "json_", is_flag=True)
def agent_read(target, last, json_):
    """Print the last turn's final answer, from the provider's transcript.

    A turn that errored prints its error and exits 7; while a turn is still
    running there is no answer yet (exit 8) unless --last asks for the previous one.
    Control characters and escape sequences are left out (--json keeps them);
    for a provider without a transcript it prints the pane's screen.
    """
    with sdk() as orcr:
        r = orcr.read(target, last=last)
    failed = r.get("text") is None and r.get("turn_status") in TURN_FAILURES
    if json_:
        click.echo(jsonlib.dumps(r))
        if failed:
            raise SystemExit(ExitCode.TURN_FAILED)
        return
    if r.get("text") is not None:
        click.echo(printable(r["text"]))
    elif failed:
        raise OrcrCliError(_turn_failure(r["path"], r.get("turn"), r), ExitCode.TURN_FAILED)
    elif r.get("screen") is not None:
        screen = printable(r["screen"]).splitlines()
        click.echo("\n".join(line.rstrip() for line in screen).rstrip("\n"))
    elif r.get("turn_status") == "completed":  # the model answered with no text at all
        raise OrcrCliError(f"agent {r['path']}: turn {r.get('turn')} completed with no answer text")
    else:
        raise OrcrCliError(f"agent {r['path']} has no final answer yet (status {r['status']})")


#: terminal escape sequences (CSI, OSC) and the C0/C1 controls other than \t and \n
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text an agent wrote, safe to print on a terminal: line ends as ``\\n``, no
    escape sequences, no control characters but tab and newline (a BEL or ^C in an
    answer is never meant for your terminal; ``--json`` keeps the text as it was)."""
    text = text.replace("\r\n", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


@agent.command(name="attach")
@click.argument("target")
def agent_attach(target):
    """Focus the agent's pane and print how to attach a terminal to it."""
    with sdk() as orcr:
        r = orcr._call("agent.attach", target)
    click.echo(r["hint"])
    if r.get("command") and sys.stdin.isatty() and sys.stdout.isatty():
        os.execvp(r["command"][0], r["command"])
