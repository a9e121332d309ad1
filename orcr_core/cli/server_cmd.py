"""``orcr server``: start, stop, status."""

from __future__ import annotations

import json as jsonlib
import time

import click

from orcr_core.cli.errors import ExitCode, OrcrCliError
from orcr_core.cli.output import capabilities


@click.group()
def server():
    """The orcr server (started on demand by any command that needs it)."""


@server.command(name="start")
@click.option(
    "--foreground",
    is_flag=True,
    help="Run in this process (for supervisors, orcr service): exits 1 when it cannot "
    "serve (a server already runs, the store is newer), 0 after SIGTERM.",
)
def server_start(foreground):
    """Start the server; returns once its socket answers."""
    if foreground:
        from orcr_core.server.foreground import main_foreground

        raise SystemExit(main_foreground(already_running_ok=False))
    from orcr_core.sdk.client import Client

    with Client() as c:
        info = c.server_info
    click.echo(f"orcr server {info['pid']} running (protocol {info['protocol']})")


STOP_TIMEOUT = 30.0


@server.command(name="stop")
def server_stop():
    """Stop the server and wait until its process has exited. Agents keep running
    in their panes.

    When the socket does not answer (deleted by hand), the server's pid is read
    from its lock file and the server is sent SIGTERM.
    """
    import os
    import signal

    from orcr_core.sdk.client import Client, ServerError
    from orcr_core.server import lockfile

    try:
        with Client(autostart=False) as c:
            pid = c.call("server.stop")["pid"]
    except ServerError as exc:
        if exc.code not in ("server_not_running", "socket_missing", "server_stopping"):
            raise
        held = lockfile.holder()
        if held is None:
            click.echo("orcr server is not running")
            return
        if held.pid is None:
            raise OrcrCliError(
                f"a process holds {lockfile.path()} but wrote no pid; find it with: "
                f"fuser {lockfile.path()}"
            ) from None
        pid = held.pid
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_TIMEOUT
    while not (lockfile.pid_gone(pid) and lockfile.holder() is None):
        if time.monotonic() > deadline:
            raise OrcrCliError(
                f"orcr server {pid} did not exit within {STOP_TIMEOUT:.0f}s; "
                f"see {lockfile.path().parent / 'server.log'}, or end it: kill -9 {pid}"
            )
        time.sleep(0.05)
    click.echo(f"orcr server {pid} stopped")


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if abs(n) >= 2**30 else f"{n / 2**20:.0f} MiB"


def _memory_line(m: dict) -> str:
    """``memory 3.1 GiB available  floor 2.0 GiB  reserved 512 MiB (2 loading)  ...``"""
    est = ", ".join(
        f"{p} {_mib(e['bytes'])}" + ("" if e["learnt_from"] else " (default)")
        for p, e in m["estimates"].items()
    )
    return (
        f"memory {_mib(m['available'])} available  floor {_mib(m['floor'])}  "
        f"reserved {_mib(m['reserved'])} ({len(m['loading'])} loading)"
        + (f"  per agent: {est}" if est else "")
    )


def _ceilings_line(c: dict) -> str:
    """``ceilings cgroup_v1  fleet 1.2 GiB/20.0 GiB  pressure 0.0% (holds above 40%)``."""
    from orcr_core.ceilings import human

    line = f"ceilings {c['mechanism']}" + ("" if c["mechanism"] != "none" else f" ({c['reason']})")
    if c.get("tested") and "real kernel" not in c["tested"].split(",")[0]:
        line += f" ({c['tested']})"  # cgroup_v2, systemd: a mimic or a fake only
    fleet = c.get("fleet")
    if fleet:
        line += f"  fleet {human(fleet.get('current') or 0)}/{human(fleet.get('max'))}"
    if c.get("pressure") is not None:
        line += f"  pressure {c['pressure']:.1f}% (holds above {c['max_memory_pressure']}%)"
    return line


def _print_status(s: dict) -> None:
    click.echo(
        f"pid {s['pid']}  version {s['version']}  protocol {s['protocol']}  up {s['uptime']:.0f}s"
    )
    click.echo(f"store {s['store']} (schema {s['schema_version']})")
    drv = s["driver"]
    info = drv.get("info") or {}
    facts = "".join(f"  {k} {info[k]}" for k in ("version", "protocol") if info.get(k) is not None)
    if info.get("capabilities") is not None:  # what the multiplexer's ping reports (herdr)
        facts += f"  capabilities {capabilities(info['capabilities'])}"
    click.echo(
        f"driver {drv['name'] or '-'}{facts}" + (f"  ERROR: {drv['error']}" if drv["error"] else "")
    )
    click.echo(f"queue {s['queue_depth']} queued  live {s['live']}/{s['caps']['max']}")
    if s.get("held"):
        click.echo(f"held: {s['held']}")
    for reason in (s.get("usage_limits") or {}).values():  # orcr_core/usage_limits
        click.echo(f"held: {reason}")
    if s.get("config_error"):  # an edit the server refused: it runs the last good config
        click.echo(
            f"config not applied (the last good one is in force): {s['config_error']['error']}"
        )
    for b in s.get("budgets") or []:  # token budgets (docs/usage.md)
        if b.get("reason"):
            click.echo(f"held: {b['reason']} ({b['held']} queued)")
        else:
            click.echo(f"budget {b['scope']}: {b['spent']}/{b['tokens']} tokens per {b['per']}")
    mem = s.get("memory")
    if mem and mem.get("floor"):  # what promotion counts on: see concepts.md (memory)
        click.echo(_memory_line(mem))
    if s.get("ceilings"):
        click.echo(_ceilings_line(s["ceilings"]))
    for b in s.get("blocked") or []:
        click.echo(f"blocked {b['path']}: {b['reason']}")
    for name, p in s["providers"].items():
        cap = p["cap"] if p["cap"] is not None else "-"
        missing = "  (not installed)" if p.get("installed") is False else ""
        click.echo(f"  {name}: {p['live']}/{cap}{missing}")
    d, at = s["drift"], s.get("drift_at") or {}

    def count(name: str, label: str) -> str:  # a counter that is not 0 says since when
        if not (d[name] and at.get(name)):
            return f"{label} {d[name]}"
        # lost and repaired are totals over the store's life (they survive restarts),
        # not what is wrong now; the pane counts are what the last check found
        return f"{label} {d[name]} " + (
            f"(total, last at {at[name]})" if name in ("lost", "repaired") else f"(at {at[name]})"
        )

    click.echo(
        "drift "
        + "  ".join(
            count(name, label)
            for name, label in (
                ("lost", "lost"),
                ("repaired", "repaired"),
                ("orphan_agent_panes", "orphan agent panes"),
                ("unmarked_panes", "unmarked panes"),
            )
        )
    )
    if drv.get("name") == "herdr" or s.get("unmanaged"):
        click.echo(
            f"unmanaged {s.get('unmanaged', 0)} (agents in your other herdr sessions: "
            "orcr agent ls --unmanaged)"
        )
    if s.get("parked"):
        click.echo(
            f"parked {s['parked']} agents (in the parking area; a prompt or an attach "
            "brings one back)"
        )
    if s.get("stalled"):
        click.echo(f"stalled {s['stalled']} working agents (no transcript growth)")
    lp = s.get("loops")
    if lp:
        click.echo(f"loops {lp['active']} active  next fire {lp['next_fire_at'] or '-'}")
    nt = s.get("notify")
    if nt and (nt["sinks"] or nt["off"] or nt["undeliverable"]):
        click.echo(
            f"notify sinks {', '.join(nt['sinks']) or '-'}  waiting {nt['waiting']}  "
            f"sent {nt['sent']}  undeliverable {nt['undeliverable']}"
        )
        for name, why in nt["off"].items():
            click.echo(f"notify sink {name} is off: {why}")
        bad = nt.get("last_undeliverable")
        if bad:
            click.echo(
                f"undeliverable: the last, via {bad['sink']} ({bad['rule']}, event "
                f"{bad['seq']}): {bad['error']}"
            )
    m = s.get("monitor")
    if m:
        click.echo(
            f"monitor transcripts {m['transcripts_notified']} notified "
            f"({m['notifications']}), {m['transcripts_polled']} polled  pane events "
            f"{'live' if m['pane_events'] else 'polled'}"
            + (f" (resynced {m['resyncs']}x)" if m.get("resyncs") else "")
            + "  write transactions "
            f"{s.get('write_transactions', 0)}"
        )


@server.command(name="status")
@click.option("--json", "json_", is_flag=True)
def server_status(json_):
    """Pid, version, store, queue depth, live agents against caps, drift counters."""
    from orcr_core.sdk.client import Client, ServerError

    try:
        with Client(autostart=False) as c:
            s = c.call("server.status")
    except ServerError as exc:
        if exc.code == "server_not_running":
            from orcr_core import dirs
            from orcr_core.store import health

            why = health.file_problem(dirs.store_path())
            if why:  # the last server stopped on it, and none can start
                raise OrcrCliError(
                    f"{exc}; but none can start: the store is damaged: {why} "
                    "[store_corrupted]; orcr doctor says what to do",
                    ExitCode.NO_SERVER,
                ) from None
            raise OrcrCliError(str(exc), ExitCode.NO_SERVER) from None
        raise
    if json_:
        click.echo(jsonlib.dumps(s))
    else:
        _print_status(s)
