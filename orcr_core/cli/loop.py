"""``orcr loop``: create, pause, resume, rm, ls, logs, next, and ``loop run start|stop|ls``."""

from __future__ import annotations

import json as jsonlib
import re
import shutil

import click

from orcr_core.cli.agent_show import tokens_text
from orcr_core.cli.loop_logs import follow_events, show_run_logs
from orcr_core.cli.output import echo_results, echo_table, sdk
from orcr_core.cli.params import duration


def _local(iso: str | None, tz: str | None = None) -> str:
    """An ISO UTC timestamp in the machine's local zone (or the given one), to the second."""
    if not iso:
        return "-"
    from datetime import datetime

    dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if tz:
        from zoneinfo import ZoneInfo

        dt = dt.astimezone(ZoneInfo(tz))
    else:
        dt = dt.astimezone()
    return dt.strftime("%Y-%m-%d %H:%M:%S %Z")


def _utc(iso: str | None) -> str:
    return iso.split(".")[0] + "Z" if iso and "." in iso else (iso or "-")


def _local_zone() -> str:
    """This machine's zone; a ``$TZ`` that names none is a usage error."""
    from orcr_core.loops.zone import ZoneError, local_zone_name

    try:
        return local_zone_name()
    except ZoneError as exc:
        raise click.UsageError(str(exc)) from None


@click.group()
def loop():
    """Loops: durable cron for any command (docs/loops.md)."""


class _DashDash(click.Command):
    """Everything after the first ``--`` is the loop's argv, kept away from click
    (which would drop the ``--`` and mix the argv into the positionals)."""

    def parse_args(self, ctx, args):
        if "--" in args:
            i = args.index("--")
            ctx.meta["loop_argv"] = args[i + 1 :]
            args = args[:i]
        else:
            ctx.meta["loop_argv"] = None
        return super().parse_args(ctx, args)


def _env_pairs(ctx, param, values):
    out = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: give KEY=VALUE", param=param)
        out[key] = value
    return out


@loop.command(name="create", cls=_DashDash, context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("cron", nargs=-1, type=click.UNPROCESSED, metavar="[CRON] -- ARGV...")
@click.option(
    "--once-at", metavar="WHEN", help="Fire once: 30m, RFC 3339, or local YYYY-MM-DD HH:MM[:SS]."
)
@click.option(
    "--tz", metavar="ZONE", help="IANA time zone for the cadence (default: this machine's)."
)
@click.option(
    "--overlap",
    type=click.Choice(["queue", "skip"]),
    default="queue",
    show_default=True,
    help="At max-concurrency: keep one coalesced pending run, or drop the fire.",
)
@click.option(
    "--max-concurrency",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Concurrent runs of this loop.",
)
@click.option("--timeout", callback=duration, help="Stop a run that runs longer (30m, 2h).")
@click.option(
    "--keep-agents",
    is_flag=True,
    help="A run's agents outlive its exit (default: they end with the run).",
)
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_env_pairs,
    help="Add to the runs' environment (repeatable).",
)
@click.option("--json", "json_", is_flag=True, help="Print the loop as JSON.")
@click.pass_context
def loop_create(
    ctx, name, cron, once_at, tz, overlap, max_concurrency, timeout, keep_agents, env, json_
):
    """Create loop NAME firing ARGV on CRON, or once with --once-at.

    \b
      orcr loop create nightly "0 9 * * 1-5" -- ./triage.sh --all
      orcr loop create reminder --once-at 30m -- notify-send hi

    The -- is required: everything after it is the argv, run directly with no
    shell (say -- sh -c '...' for one) in this directory, in its own process
    group, with ORCR_PATH=NAME/RUN_ID, this shell's PATH and any --env pairs. A
    command that does not exist (on PATH, or as a path relative to this
    directory) is refused now. CRON is five fields (or @hourly, @daily, @weekly,
    @monthly, @yearly), evaluated in --tz (default: this machine's zone) with
    cronie's DST rules; there is no --every: write */5 * * * *. The loop is
    global: $ORCR_PATH is not applied to its name.
    """
    argv = ctx.meta.get("loop_argv")
    pre = list(cron)
    if any(a.startswith("--every") for a in pre):
        raise click.UsageError(
            'there is no --every: intervals are cron expressions, e.g. "*/5 * * * *"'
        )
    # a word like "-1 * * * *" or -5 is a (bad) cron field, for the cadence's own
    # error to name, not an option
    unknown = [a for a in pre if a.startswith("-") and not re.match(r"-\d|-\S*\s", a)]
    if unknown:
        raise click.UsageError(f"no such option: {unknown[0]}")
    if argv is None:
        raise click.UsageError(
            "put the command after --, e.g. orcr loop create "
            f'{name} "0 9 * * *" -- ./nightly.sh (the -- is required)'
        )
    if once_at is not None and pre:
        raise click.UsageError("give a CRON expression or --once-at, not both")
    if once_at is None and len(pre) != 1:
        if not pre:
            raise click.UsageError('give a CRON expression (e.g. "0 9 * * *") or --once-at WHEN')
        raise click.UsageError(
            f"one CRON expression, quoted, then -- and the command "
            f"(got {len(pre)} words before --: {' '.join(pre)!r}); "
            f'e.g. orcr loop create {name} "0 9 * * *" -- ./nightly.sh'
        )
    if not argv:
        raise click.UsageError("give the command to run after --, e.g. -- ./nightly.sh")
    tz = tz or _local_zone()
    if "/" not in argv[0]:
        argv[0] = shutil.which(argv[0]) or argv[0]  # the server refuses an unknown one
    with sdk() as orcr:
        lp = orcr.loop_create(
            name,
            argv,
            cron=pre[0] if pre else None,
            once_at=once_at,
            tz=tz,
            overlap=overlap,
            max_concurrency=max_concurrency,
            timeout=timeout,
            keep_agents=keep_agents,
            env=env or None,
        )
    if json_:
        click.echo(jsonlib.dumps(lp))
        return
    click.echo(
        f"{lp['name']} {lp['uuid']} next {_local(lp['next_fire_at'], lp['tz'])} "
        f"({_utc(lp['next_fire_at'])})"
    )


def _simple(verb: str, help_text: str):
    @click.argument("name")
    @click.option("--json", "json_", is_flag=True)
    def cmd(name, json_):
        with sdk() as orcr:
            res = getattr(orcr, f"loop_{verb}")(name)
        lp = res.get("loop", res)
        if json_:
            click.echo(jsonlib.dumps(res))
        else:
            extra = ""
            if verb == "rm" and res.get("canceled"):
                extra = " (canceled " + ", ".join(res["canceled"]) + ")"
            click.echo(f"{lp['name']} {lp['status']}{extra}")

    cmd.__doc__ = help_text
    return loop.command(name=verb)(cmd)


_simple("pause", "Pause loop NAME: no fires, pending runs held, running runs continue.")
_simple("resume", "Resume loop NAME: the next fire counts from now (nothing replayed).")
_simple("rm", "Remove loop NAME (its name is free again); its pending runs are canceled.")


@loop.command(name="ls")
@click.option("--all", "all_", is_flag=True, help="Include ended loops.")
@click.option("--json", "json_", is_flag=True, help="JSON rows.")
def loop_ls(all_, json_):
    """List loops: next fire in the loop's zone and UTC, the last run and its
    status, and the last missed fire with why (server down 02:00–07:12)."""
    with sdk() as orcr:
        rows = orcr.loop_list(all=all_)
    if json_:
        click.echo(jsonlib.dumps(rows))
        return
    data = []
    for lp in rows:
        cadence = f"{lp['cron']} {lp['tz']}" if lp["cron"] else f"once {_utc(lp['once_at'])}"
        last = lp["last_run"]
        data.append(
            (
                lp["name"],
                lp["status"] + (f" ({lp['end_reason']})" if lp["end_reason"] else ""),
                cadence,
                _local(lp["next_fire_at"], lp["tz"]),
                _utc(lp["next_fire_at"]),
                f"{last['run_id']} {last['status']}" if last else "-",
                _missed(lp.get("last_missed"), lp["tz"]),
            )
        )
    if not data:  # a line, so an empty list is not mistaken for a silent failure
        click.echo("no loops" if all_ else "no loops (--all shows ended ones)")
    else:
        echo_table(
            (
                "NAME",
                "STATUS",
                "CADENCE",
                "NEXT (LOOP ZONE)",
                "NEXT (UTC)",
                "LAST RUN",
                "LAST MISSED",
            ),
            data,
        )


def _missed(m: dict | None, tz: str) -> str:
    """``2026-12-01 02:00 (3 fires): server down 01:58–07:12``."""
    if not m:
        return "-"
    when = _local(m["first"], tz)[:16]
    fires = f" ({m['count']} fires)" if m.get("count", 1) > 1 else ""
    return f"{when}{fires}: {m['why']}"


@loop.command(name="logs")
@click.argument("name")
@click.option("--run", "run_id", metavar="RUN_ID", help="One run (e.g. r82c9s).")
@click.option(
    "--source",
    type=click.Choice(["orcr", "run"]),
    default="orcr",
    show_default=True,
    help="orcr: what the scheduler did (event rows); run: the command's output.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the loop (or run) ends.")
def loop_logs(name, run_id, source, follow):
    """Show a loop's history: scheduler decisions, or its runs' output.

    NAME resolves to the active definition, else the most recent ended one (a
    loop uuid picks an older one).
    """
    with sdk() as orcr:
        if source == "orcr":
            follow_events(orcr, name, run_id, follow)
        else:
            show_run_logs(orcr, name, run_id, follow)


@loop.command(name="next")
@click.argument("cron")
@click.option("--tz", metavar="ZONE", help="IANA time zone (default: this machine's).")
@click.option("--from", "from_", metavar="WHEN", help="Start after this time (default now).")
@click.option("--count", type=click.IntRange(1, 1000), default=5, show_default=True)
@click.option("--json", "json_", is_flag=True, help='{"fires": [UTC ISO 8601, ...]}')
def loop_next(cron, tz, from_, count, json_):
    """Preview the next fires of CRON without creating anything.

    --from takes RFC 3339 with an offset, or the forms --once-at accepts.
    """
    from orcr_core.loops import cadence
    from orcr_core.sdk import Orcr

    tz = tz or _local_zone()
    try:
        fires = Orcr.loop_next(cron, tz=tz, start=from_, count=count)
    except cadence.CadenceError as exc:
        raise click.BadParameter(str(exc)) from None
    if json_:
        click.echo(jsonlib.dumps({"fires": fires}))
        return
    for f in fires:
        click.echo(f"{_local(f, tz)}  {f}")


@loop.group(name="run")
def loop_run():
    """A loop's runs: start one now, stop them, list them."""


@loop_run.command(name="start")
@click.argument("name")
@click.option("--json", "json_", is_flag=True)
def loop_run_start(name, json_):
    """Allocate a manual run of NAME and print "<loop>/<run_id> <run_uuid>".

    At max-concurrency the run waits pending and starts when a slot frees.
    """
    with sdk() as orcr:
        run = orcr.loop_run_start(name)
    if json_:
        click.echo(jsonlib.dumps(run))
    else:
        click.echo(f"{run['path']} {run['uuid']}")


@loop_run.command(name="stop")
@click.argument("target", metavar="NAME[/RUN_ID]")
@click.option("--wait", is_flag=True, help="Return once the stop path has finished.")
@click.option("--json", "json_", is_flag=True)
def loop_run_stop(target, wait, json_):
    """Stop one run (NAME/RUN_ID) or every unfinished run of NAME.

    A pending run is canceled. A running one goes to stopping (no new agents
    under its path), gets TERM, then KILL after timings.stop_grace, and its
    agents are killed; it ends stopped.
    """
    with sdk() as orcr:
        res = orcr.loop_run_stop(target, wait=wait)
    echo_results(res, json_)


@loop_run.command(name="ls")
@click.argument("name")
@click.option("--json", "json_", is_flag=True)
def loop_run_ls(name, json_):
    """List the runs of loop NAME, oldest first, with the tokens each run's agents
    (NAME/RUN_ID/**) spent ('-' when none reported usage)."""
    with sdk() as orcr:
        rows = orcr.loop_run_list(name)
    if json_:
        click.echo(jsonlib.dumps(rows))
        return
    data = [
        (
            r["path"],
            r["status"],
            r["kind"],
            _local(r["due_at"]),
            "-" if r["exit_code"] is None else str(r["exit_code"]),
            tokens_text(r.get("usage")),
            r["uuid"],
        )
        for r in rows
    ]
    if data:
        echo_table(("RUN", "STATUS", "KIND", "DUE", "EXIT", "TOKENS", "UUID"), data)
