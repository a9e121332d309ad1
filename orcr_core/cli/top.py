"""``orcr top``: the fleet live, full screen (Textual, imported here only)."""

from __future__ import annotations

import json as jsonlib
import sys

import click

from orcr_core.cli.errors import OrcrCliError

SORTS = ("path", "status", "age")


@click.command()
@click.option("--once", is_flag=True, help="Print one frame and exit (no screen).")
@click.option("--json", "json_", is_flag=True, help="With --once: the frame as JSON.")
@click.option("--all", "all_", is_flag=True, help="With --once: ended agents too.")
@click.option(
    "--filter",
    "filter_",
    metavar="TERMS",
    default="",
    help="Only matching agents: statuses (idle working), 'stalled', path globs (review/*) or substrings.",
)
@click.option("--sort", type=click.Choice(SORTS), default="path", show_default=True)
def top(once, json_, all_, filter_, sort):
    """The fleet at a glance: agents grouped by level-1 path, live.

    One watch.open stream feeds the view (it never polls the store) and it
    reconnects after a server restart. A lander (orcr tasks land) running on
    this machine has a header line: its queue, branch, task and step. Keys: / filter, s sort, enter last
    answer, p prompt, k kill, a attach, r resume a lost agent, space
    pause/resume a loop, f fire a loop now, ? help, q quit (docs/top.md).
    """
    from orcr_core.sdk.client import Client
    from orcr_core.top.model import Filter

    if json_ and not once:
        raise click.UsageError("--json needs --once (the screen is not JSON)")
    if all_ and not once:
        raise click.UsageError("--all needs --once (the screen shows agents as they end)")
    flt = Filter.parse(filter_)
    with Client() as c:  # starts the server when none runs
        socket_path = c.path
    if once:
        from orcr_core.top.source import load_once
        from orcr_core.top.text import format_frame

        frame = load_once(socket_path, all=all_).frame(flt, sort)
        if json_:
            click.echo(jsonlib.dumps(frame))
        else:
            click.echo(format_frame(frame))
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise OrcrCliError("orcr top needs a terminal; for scripts use: orcr top --once [--json]")
    from orcr_core.top.app import TopApp

    TopApp(socket_path, flt=flt, sort=sort).run()
