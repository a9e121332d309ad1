"""``orcr doctor``: can this machine run orcr agents, and with what?

Every check is a row ``{check, ok, level, detail, fix}``: ``level`` is ``ok``,
``warn`` (orcr runs, but something is missing or degraded) or ``fail``;
``fix`` says how to fix a row that is not ``ok``. The exit code is 0 when orcr
can run an agent at all (a multiplexer driver is available, its directories
are writable, and the store is intact, writable, not newer than this orcr and
passes SQLite's integrity check), else 1: a missing provider CLI is a warning, not a reason to
fail, even the default provider's.

Import-light: pluggy, peewee and tomlkit are imported inside the checks. The rows by
subject: multiplexers in :mod:`~orcr_core.cli.doctor_mux`, provider CLIs and herdr's
integrations in :mod:`~orcr_core.cli.doctor_providers`, the store in
:mod:`~orcr_core.cli.doctor_store`; here orcr itself, its server, caps and service.
"""

from __future__ import annotations

import json as jsonlib
from dataclasses import dataclass

import click

from orcr_core.cli.doctor_mux import MultiplexerChecks
from orcr_core.cli.doctor_providers import INTEGRATIONS, ProviderChecks

SOCKET_TIMEOUT = 3.0


@dataclass
class Check:
    check: str
    level: str  # ok | warn | fail
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict:
        return {
            "check": self.check,
            "ok": self.level == "ok",
            "level": self.level,
            "detail": self.detail,
            "fix": self.fix if self.level != "ok" else None,
        }


class Doctor(MultiplexerChecks, ProviderChecks):
    """Runs the checks in order; later checks read what earlier ones found."""

    def __init__(self) -> None:
        self.rows: list[Check] = []
        self.config = None
        self.registry = None
        self.driver_name: str | None = None
        self.can_run = True
        self.cli_found: dict[str, bool] = {}

    def add(self, check: str, level: str, detail: str, fix: str | None = None) -> Check:
        row = Check(check, level, detail, fix)
        self.rows.append(row)
        return row

    def run(self) -> list[Check]:
        self.check_config()
        self.check_dirs()
        self.check_plugins()
        self.check_driver()
        self.check_herdr()
        self.check_tmux()
        for name in self.cli_providers():
            self.check_provider(name)
        self.check_default_provider()
        for name in INTEGRATIONS:
            self.check_integration(name)
        self.check_socket()
        self.check_store()
        self.check_caps()
        self.check_ceilings()
        self.check_sandbox()
        self.check_service()
        return self.rows

    # -- orcr itself ---------------------------------------------------------------------
    def check_config(self) -> None:
        from orcr_core import __version__, dirs
        from orcr_core.config import DEFAULTS, Config, ConfigError, load

        path = dirs.config_path()
        try:
            self.config = load()
        except ConfigError as exc:
            self.config = Config(DEFAULTS, path)
            self.can_run = False
            self.add(
                "config",
                "fail",
                str(exc),
                f"edit {path} (orcr config set KEY VALUE validates what it writes)",
            )
            return
        where = "" if path.exists() else " (no file: all defaults)"
        self.add("config", "ok", f"orcr {__version__}, config {path}{where}")

    def check_dirs(self) -> None:
        from orcr_core import dirs

        places = list(dict.fromkeys([dirs.data_dir(), dirs.config_path().parent]))
        for path in places:
            problem = dirs.writable_problem(path)
            if problem:
                self.can_run = False
                self.add(
                    "directories",
                    "fail",
                    problem,
                    f"make {path} writable (chmod u+w, or remount read-write), or point "
                    "ORCR_HOME at a writable directory",
                )
                return
        self.add("directories", "ok", "writable: " + ", ".join(str(p) for p in places))

    def check_plugins(self) -> None:
        from orcr_core.pm.plugins import Registry, build_registry, get_plugin_manager

        try:
            self.registry = build_registry(get_plugin_manager())
        except Exception as exc:  # a broken plugin: PluginError, ImportError, ...
            self.registry = Registry()
            self.can_run = False
            self.add(
                "plugins",
                "fail",
                f"{type(exc).__name__}: {exc}",
                "uninstall or block the plugin named above (ORCR_BLOCK_PLUGINS=name), "
                "or reinstall orcr",
            )
            return
        drivers = ", ".join(sorted(self.registry.drivers)) or "none"
        providers = ", ".join(sorted(self.registry.providers)) or "none"
        self.add("plugins", "ok", f"drivers: {drivers}; providers: {providers}")

    # -- orcr's own server and store -----------------------------------------------------
    def check_socket(self) -> None:
        import socket

        from orcr_core.sdk.client import Client, ServerError

        old = socket.getdefaulttimeout()
        socket.setdefaulttimeout(SOCKET_TIMEOUT)
        client = Client(autostart=False)
        try:
            info = client.connect().server_info
            self.add(
                "server",
                "ok",
                f"orcr server {info.get('pid')} ({info.get('server_version')}) answers on "
                f"{client.path}, protocol {info.get('protocol')}",
            )
            status = client.call("server.status")
            self._multiplexer(status.get("driver") or {})
            if status.get("config_error"):
                self.add(
                    "config in force",
                    "warn",
                    "the server did not apply the last edit of the config file and runs the "
                    f"last good one: {status['config_error']['error']}",
                    "fix the file, then: orcr config reload",
                )
        except ServerError as exc:
            if exc.code == "server_not_running":
                self.add(
                    "server",
                    "warn",
                    f"no orcr server answers at {client.path}; the CLI starts one when it needs it",
                    "nothing to do, or start it now: orcr server start",
                )
            elif exc.code == "socket_missing":
                self.add(
                    "server",
                    "fail",
                    f"{exc.message} [{exc.code}]",
                    "orcr server stop (it finds the pid in the lock file and waits for it to "
                    "exit), then orcr server start",
                )
            else:
                self.add(
                    "server",
                    "fail",
                    f"{exc.message} [{exc.code}]",
                    "stop the old server and retry: orcr server stop (on unsupported_version, "
                    "upgrade the older of client and server)",
                )
        except OSError as exc:
            self.add(
                "server",
                "fail",
                f"the orcr socket {client.path} did not answer: {exc}",
                f"see {client.path.parent / 'server.log'}; orcr server stop, then retry",
            )
        finally:
            client.close()
            socket.setdefaulttimeout(old)

    def check_store(self) -> None:
        from orcr_core.cli.doctor_store import check_store

        check_store(self)

    def check_caps(self) -> None:
        caps = self.config.provider_caps()
        per = ", ".join(f"{k} {v}" for k, v in sorted(caps.items())) or "none"
        floor = self.config.get("concurrency.min_free_memory")
        self.add(
            "caps",
            "ok",
            f"global {self.config.cap()}; per provider: {per}; min free memory {floor}",
        )
        import psutil

        from orcr_core.config import memory_floor

        total = psutil.virtual_memory().total
        if memory_floor(floor, total) >= total:
            self.add(
                "memory floor",
                "warn",
                f"concurrency.min_free_memory = {floor!r} is at least this machine's RAM "
                f"({total / 2**30:.1f} GiB): no agent is ever promoted",
                "orcr config set concurrency.min_free_memory auto (or a smaller size, or 0)",
            )

    def check_ceilings(self) -> None:
        """The ceilings mechanism a server started here would use, and PSI (docs/ceilings.md)."""
        from orcr_core import ceilings, dirs
        from orcr_core.ceilings import pressure

        found = ceilings.detect(self.config, dirs.instance_id())
        if found.backend is not None:
            self.add("ceilings", "ok", f"{found.mechanism}: {found.reason}")
        else:
            self.add(
                "ceilings",
                "warn",
                f"none: {found.reason}",
                "agents run without memory, process and CPU ceilings; runs that ask "
                "for one are refused (limits_unavailable); see docs/ceilings.md",
            )
        psi = pressure.some_avg10()
        if psi is None:
            self.add("pressure", "warn", f"{pressure.path()} unreadable: the pressure hold is off")
        else:
            limit = self.config.get("concurrency.max_memory_pressure")
            self.add("pressure", "ok", f"memory some avg10 {psi:.1f}% (holds above {limit}%)")

    def check_sandbox(self) -> None:
        """Whether ``--sandbox`` can start one here (docs/sandbox.md): a fail when the
        config turns it on by default, else a warning (only --sandbox would be refused)."""
        from orcr_core.sandbox import bwrap

        program = self.config.get("sandbox.bwrap", "bwrap")
        why = bwrap.unavailable(program)
        tables = self.config.get("sandbox") or {}
        on = bool(tables.get("default")) or any(
            isinstance(t, dict) and t.get("default") for t in tables.values()
        )
        if why is None:
            state = "on by default" if on else "off by default (agent run --sandbox)"
            self.add("sandbox", "ok", f"bubblewrap {bwrap.binary(program)} starts one; {state}")
            return
        self.add(
            "sandbox",
            "fail" if on else "warn",
            f"agent run --sandbox is refused here: {why.split('; install bubblewrap')[0]}",
            bwrap.INSTALL,
        )

    def check_service(self) -> None:
        from orcr_core.service.manage import doctor_row, manager

        self.add("service", *doctor_row(manager().status()))


def _print(rows: list[Check], can_run: bool) -> None:
    label = {"ok": "ok", "warn": "warn", "fail": "FAIL"}
    for r in rows:
        click.echo(f"{label[r.level]:<5} {r.check}: {r.detail}")
        if r.level != "ok" and r.fix:
            click.echo(f"      fix: {r.fix}")
    click.echo(
        "orcr can run agents" if can_run else "orcr cannot run agents: fix the FAIL rows above"
    )


@click.command(name="doctor")
@click.option("--json", "json_", is_flag=True, help='Print {"ok": bool, "checks": [...]}.')
def doctor(json_):
    """Check what orcr needs: driver, herdr, tmux, provider CLIs, server, store.

    One line per check (ok, warn or FAIL, with a fix). Exits 0 when orcr can run
    an agent (a multiplexer driver is available, orcr's directories are writable,
    and the store is an intact SQLite file the server can write, not newer than
    this orcr, that passes PRAGMA integrity_check), else 1.
    """
    d = Doctor()
    rows = d.run()
    if json_:
        click.echo(jsonlib.dumps({"ok": d.can_run, "checks": [r.to_dict() for r in rows]}))
    else:
        _print(rows, d.can_run)
    raise SystemExit(0 if d.can_run else 1)
