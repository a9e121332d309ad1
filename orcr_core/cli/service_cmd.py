"""``orcr service``: run the server at boot under systemd (Linux) or launchd (macOS)."""

from __future__ import annotations

import json as jsonlib

import click

from orcr_core.cli.errors import OrcrCliError

MANAGER = click.option(
    "--manager",
    type=click.Choice(["systemd", "launchd"]),
    default=None,
    help="The service manager (default: launchd on macOS, else systemd).",
)


@click.group()
def service():
    """A per-user service that runs `orcr server start --foreground` at boot and
    restarts it after a crash (a systemd user unit; a launchd agent on macOS).
    Without it, the CLI starts a server when a command needs one."""


@service.command(name="install")
@MANAGER
@click.option("--dry-run", is_flag=True, help="Print the unit file; write and enable nothing.")
def service_install(manager, dry_run):
    """Write the unit, enable and start it; say what was done and how to undo it.

    The unit runs this orcr (its absolute path), with ORCR_HOME when set and the
    PATH this shell has, so loop runs and agents find their commands. A server the
    CLI had started is stopped first (agents keep running) so the service's takes
    over. Run it again after moving orcr to another venv."""
    from orcr_core.service.manage import ServiceError
    from orcr_core.service.manage import manager as get

    m = get(manager)
    if dry_run:
        click.echo(f"# {m.path}")
        click.echo(m.text(), nl=False)
        return
    try:
        for line in m.install():
            click.echo(line)
    except ServiceError as exc:
        raise OrcrCliError(str(exc)) from None


@service.command(name="uninstall")
@MANAGER
def service_uninstall(manager):
    """Stop and disable the service and remove its unit file. Agents keep running."""
    from orcr_core.service.manage import manager as get

    for line in get(manager).uninstall():
        click.echo(line)


def _yes(value) -> str:
    return {True: "yes", False: "no", None: "unknown"}[value]


@service.command(name="status")
@MANAGER
@click.option("--json", "json_", is_flag=True)
def service_status(manager, json_):
    """Whether the unit is installed (and current), enabled and running, and
    whether lingering is on (without it a systemd user unit stops at logout)."""
    from orcr_core.service.manage import manager as get

    s = get(manager).status()
    if json_:
        click.echo(jsonlib.dumps(s))
        return
    stale = "" if s["current"] or not s["installed"] else " (differs from what install writes now)"
    click.echo(f"{s['manager']} {s['unit']}: {s['path']}")
    click.echo(f"installed {_yes(s['installed'])}{stale}")
    click.echo(f"enabled {_yes(s['enabled'])}")
    click.echo(f"running {_yes(s['running'])}")
    if s["manager"] == "systemd":
        click.echo(f"linger {_yes(s['linger'])}")
    if s["error"]:
        click.echo(s["error"], err=True)
