"""``orcr agent``: run, ls, get, wait, send, read, kill, resume, attach."""

from __future__ import annotations

import json as jsonlib
import os
import sys

import click

from orcr_core.cli import agent_verbs as verbs
from orcr_core.cli.agent_show import printable, unmanaged_table  # noqa: F401 (printable: re-exported)
from orcr_core.cli.agent_verbs import HANDFUL
from orcr_core.cli.errors import ExitCode, OrcrCliError, as_click
from orcr_core.cli.output import sdk
from orcr_core.cli.params import duration, gc_after, stdin_prompt, turn_timeout


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
    callback=turn_timeout,
    help="End the agent if a turn runs longer (30m, 2h; at most 7d).",
)
@click.option(
    "--prompt", "prompt_opt", metavar="TEXT", help="The first prompt (for --provider command)."
)
@click.option("--worktree", is_flag=True, help="Its own checkout of the repository --cwd is in.")
@click.option("--branch", metavar="NAME", help="--worktree's new branch (default orcr/<path>).")
@click.option("--base", metavar="REV", help="--worktree's start (default: HEAD's commit).")
@click.option(
    "--model",
    metavar="MODEL",
    help="This run's model, for a provider whose adapter takes one (a refusal lists them).",
)
@click.option(
    "--arg",
    "extra",
    metavar="ARG",
    multiple=True,
    help="One more argument for the provider's CLI (repeatable; as --model).",
)
@click.option(
    "--rm",
    "rm",
    is_flag=True,
    help="A job: end the agent (done) when its first turn ends; its answer stays readable.",
)
@click.option(
    "--gc-after",
    callback=gc_after,
    metavar="DURATION",
    help="End it (gc) once idle this long (10m, 2h; 1s..365d; default timings.gc_after).",
)
@click.option(
    "--sandbox/--no-sandbox",
    default=None,
    help="Run it in a bubblewrap sandbox: only its cwd and its CLI's state writable, home "
    "secrets hidden, no network unless allowed; refused if it cannot start here "
    "(default: [sandbox] default; docs/sandbox.md).",
)
@click.option(
    "--allow-net",
    "allow_net",
    multiple=True,
    metavar="HOST[:PORT]",
    help="Its sandbox's allow_net (repeatable), over [sandbox] allow_net and the "
    "provider's API hosts; needs a sandbox. Inside a sandboxed agent, only a subset of "
    "its own (docs/sandbox.md).",
)
@click.option(
    "--memory-max",
    metavar="SIZE",
    help="Its memory ceiling (512MiB, 2GiB, 25% of RAM, off): the kernel kills it past "
    "this (exit reason oom). Default [limits.<provider>], then [limits] memory_max.",
)
@click.option("--memory-high", metavar="SIZE", help="Where reclaim starts (default 90% of max).")
@click.option(
    "--pids-max",
    metavar="N",
    help="Its process ceiling (8..4194304, off): forks past it are refused, and its "
    "error says so (process ceiling N reached: forks refused M times).",
)
@click.option("--cpu-weight", metavar="N", help="Its CPU weight (1..10000; 100 = normal).")
@click.option("--json", "json_", is_flag=True, help="Print the admission as JSON.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def agent_run(
    provider, path_, name, cwd, timeout, prompt_opt, worktree, branch, base, model, extra,
    rm, gc_after, sandbox, allow_net, memory_max, memory_high, pids_max, cpu_weight, json_,
    args,
):  # fmt: skip
    """Admit an agent and print "<path> <uuid>" at once.

    ARGS is the first prompt ('-' reads it from stdin). For --provider command,
    ARGS is the argv to run (after --), and --prompt gives a first prompt.
    A prompt is UTF-8 text: other bytes are refused (invalid_prompt, with the offset).
    The agent waits in the FIFO queue until both caps have room; this command
    never waits for a slot.

    --worktree gives the agent a git worktree on a new branch (or a jj
    workspace: experimental, never run, as no jj can be installed where orcr is
    tested) made when it starts; it is removed when the agent ends unless it
    holds changes or commits on no other branch (orcr worktree ls).

    --rm makes it a job: it ends (exit reason done) as soon as its first turn
    ends, freeing its slot; orcr agent read and get still show its answer
    ([agent] rm = true makes every run a job).

    --memory-max, --memory-high, --pids-max and --cpu-weight are its ceilings
    (docs/ceilings.md); where no mechanism holds them here (orcr doctor) the
    run is refused with limits_unavailable.

    Run from inside a sandboxed agent, the new agent is sandboxed and no wider than
    it (its allow_net, paths and variables; --no-sandbox or a wider --allow-net is
    refused with sandbox_wider).
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
            prompt = stdin_prompt()
    verbs.run(
        prompt,
        json_,
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
        rm=rm or None,  # no --rm: the server applies [agent] rm
        gc_after=gc_after,
        sandbox=sandbox,
        allow_net=list(allow_net) if allow_net else None,
        limits=_limits(memory_max, memory_high, pids_max, cpu_weight),
    )


def _limits(memory_max, memory_high, pids_max, cpu_weight) -> dict | None:
    """The run's ceiling flags as the ``limits`` parameter (counts as numbers)."""
    out: dict = {}
    for key, value in (("memory_max", memory_max), ("memory_high", memory_high)):
        if value is not None:
            out[key] = value
    for key, value in (("pids_max", pids_max), ("cpu_weight", cpu_weight)):
        if value is not None:
            flag = "--" + key.replace("_", "-")
            if value != "off" and not value.isdigit():
                raise click.BadParameter(
                    f"{value!r} is not a whole number (or off)", param_hint=flag
                )
            out[key] = value if value == "off" else int(value)
    return out or None


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
    if not unmanaged:
        verbs.ls(prefix, all_, json_)
        return
    with sdk() as orcr:
        rows = orcr.unmanaged(all=all_)
    if json_:
        click.echo(jsonlib.dumps(rows))
    else:
        unmanaged_table(rows)


@agent.command(name="get")
@click.argument("target")
@click.option("--json", "json_", is_flag=True)
def agent_get(target, json_):
    """Show one agent (PATH or UUID)."""
    verbs.get(target, json_)


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
    verbs.kill(target, json_, confirm=lambda orcr: _confirm_many(orcr, target, yes))


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
@click.option("--timeout", callback=duration, help="Give up after this long (exit 4).")
@click.option("--json", "json_", is_flag=True)
def agent_wait(target, until, timeout, json_):
    """Wait until the agent's turn ends (idle) or it ends.

    Exits 4 on timeout, 5 when the agent ends badly (failed, timeout, lost,
    canceled; with --until idle, any ending but done, an --rm agent's) and 7 when it is idle after a turn that errored or was
    interrupted (the error is printed). On a terminal, shows the status and
    elapsed time while waiting.
    """
    with as_click():
        verbs.wait(target, until, timeout, json_)


@agent.command(name="send")
@click.argument("target")
@click.argument("prompt", required=False)
@click.option(
    "--timeout",
    callback=turn_timeout,
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
        prompt = stdin_prompt()
    verbs.send(target, prompt, timeout)


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
    with as_click():
        verbs.read(target, last, json_)


@agent.command(name="attach")
@click.argument("target")
def agent_attach(target):
    """Focus the agent's pane and print how to attach a terminal to it."""
    with sdk() as orcr:
        r = orcr._call("agent.attach", target)
    click.echo(r["hint"])
    if r.get("command") and sys.stdin.isatty() and sys.stdout.isatty():
        os.execvp(r["command"][0], r["command"])
