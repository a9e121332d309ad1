"""``orcr doctor``: can this machine run orcr agents, and with what?

Every check is a row ``{check, ok, level, detail, fix}``: ``level`` is ``ok``,
``warn`` (orcr runs, but something is missing or degraded) or ``fail``;
``fix`` says how to fix a row that is not ``ok``. The exit code is 0 when orcr
can run an agent at all (a multiplexer driver is available, its directories
are writable, and the store is intact, writable, not newer than this orcr and
passes SQLite's integrity check), else 1: a missing provider CLI is a warning, not a reason to
fail, even the default provider's.

Import-light: pluggy, peewee and tomlkit are imported inside the checks.
"""

from __future__ import annotations

import json as jsonlib
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import click

from orcr_core.cli.output import capabilities

VERSION_TIMEOUT = 5.0  # seconds for ``<cli> --version``
HANDSHAKE_TIMEOUT = 5.0
SOCKET_TIMEOUT = 3.0
HERDR_INSTALL = (
    "install herdr 0.9 (or 0.8; https://herdr.dev) and put it on PATH (or set herdr.binary), "
    'or use tmux instead: orcr config set driver.name "auto"'
)
TMUX_INSTALL = "install tmux >= 3.2 (apt-get install tmux / dnf install tmux / brew install tmux)"
#: provider adapters that drive a CLI found on PATH: name -> (default argv[0], how to install)
CLI_PROVIDERS = {
    "claude": ("claude", "npm install -g @anthropic-ai/claude-code"),
    "codex": ("codex", "npm install -g @openai/codex"),
}
#: where ``herdr integration install <name>`` puts its hook (reference ORCR-NOTES.md section 13)
INTEGRATIONS = {
    "claude": ("CLAUDE_CONFIG_DIR", "~/.claude", "hooks/herdr-agent-state.sh"),
    "codex": ("CODEX_HOME", "~/.codex", "herdr-agent-state.sh"),
}
_VERSION = re.compile(r"\d+(?:\.\d+)+(?:-[0-9A-Za-z][0-9A-Za-z.]*)?")


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


def parse_version(text: str) -> str | None:
    """The first version-looking token: ``2.1.38 (Claude Code)`` -> ``2.1.38``."""
    m = _VERSION.search(text or "")
    return m.group(0) if m else None


def _which(program: str) -> str | None:
    if os.sep in program:
        return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    return shutil.which(program)


def _run_version(path: str, flag: str = "--version") -> tuple[str | None, str]:
    """``(output, error)`` of ``path --version`` (no shell, short timeout)."""
    try:
        r = subprocess.run(
            [path, flag],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"{path} {flag} did not answer within {VERSION_TIMEOUT:g}s"
    except OSError as exc:
        return None, f"{path} {flag} could not run: {exc}"
    out = (r.stdout or "") + (r.stderr or "")
    if r.returncode != 0 and not parse_version(out):
        return None, f"{path} {flag} exited {r.returncode}: {out.strip()[:120]}"
    return out.strip(), ""


class Doctor:
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
        for name in CLI_PROVIDERS:
            self.check_provider(name)
        self.check_default_provider()
        for name in INTEGRATIONS:
            self.check_integration(name)
        self.check_socket()
        self.check_store()
        self.check_caps()
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
        from orcr_core.plugins import Registry, build_registry, get_plugin_manager

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

    # -- multiplexers --------------------------------------------------------------------
    def check_driver(self) -> None:
        from orcr_core.drivers import INSTALL_HINT, NoDriver, choose_driver

        wanted = self.config.get("driver.name", "auto")
        try:
            factory, why = choose_driver(self.config, self.registry)
        except NoDriver as exc:
            self.can_run = False
            if wanted == "herdr":
                fix = HERDR_INSTALL
            elif wanted == "tmux":
                fix = TMUX_INSTALL + ', or set driver.name = "auto"'
            elif wanted == "auto":
                fix = INSTALL_HINT
            else:
                known = ", ".join(sorted(self.registry.drivers)) or "none"
                fix = f'set driver.name to "auto" or one of: {known} (orcr config set driver.name auto)'
            self.add("driver", "fail", str(exc), fix)
            return
        self.driver_name = factory.name
        self.add("driver", "ok", f"{factory.name} ({why})")

    def check_herdr(self) -> None:
        binary = str(self.config.get("herdr.binary") or "herdr")
        found = _which(binary)
        if found is None:
            forced = self.config.get("driver.name") == "herdr"
            self.add(
                "herdr",
                "fail" if forced else "warn",
                f"herdr binary {binary!r} not found on PATH, so its protocol is not checked"
                + ("; orcr uses tmux instead" if self.driver_name == "tmux" else ""),
                HERDR_INSTALL if forced else HERDR_INSTALL.split(", or use tmux")[0],
            )
            return
        out, err = _run_version(found)
        version = parse_version(out or "")
        self.add("herdr", "ok", f"herdr {version or '(version unknown)'} at {found}")
        self._herdr_protocol()

    def _herdr_protocol(self) -> None:
        from orcr_core.contracts import DriverError

        factory = self.registry.drivers.get("herdr")
        if factory is None:
            self.add(
                "herdr protocol",
                "warn",
                "not checked: the herdr driver plugin is not loaded",
                "unblock it (ORCR_LOAD_PLUGINS / ORCR_BLOCK_PLUGINS) or reinstall orcr",
            )
            return
        result: dict = {}

        def handshake() -> None:
            try:
                drv = factory(self.config)
                result["facts"] = drv.handshake()
                result["socket"] = getattr(drv, "socket_path", None)
            except Exception as exc:
                result["error"] = exc

        t = threading.Thread(target=handshake, daemon=True)
        t.start()
        t.join(HANDSHAKE_TIMEOUT)
        from orcr_core import dirs

        session = self.config.get("herdr.session") or dirs.mux_name()
        if t.is_alive():
            self.add(
                "herdr protocol",
                "warn",
                f"herdr did not answer ping within {HANDSHAKE_TIMEOUT:g}s",
                f"restart orcr's herdr server: herdr session stop {session}",
            )
            return
        exc = result.get("error")
        if exc is None:
            facts = result["facts"]
            self.add(
                "herdr protocol",
                "ok",
                f"herdr {facts.get('version', '?')} speaks protocol {facts.get('protocol')} "
                f"(session {facts.get('session', session)!r}); ping capabilities: "
                + capabilities(facts.get("capabilities")),
            )
        elif isinstance(exc, DriverError) and exc.retryable:
            self.add(
                "herdr protocol",
                "warn",
                f"not checked: orcr's herdr server (session {session!r}) is not running "
                f"({exc}); orcr starts it when it needs it",
                f"to check now: herdr --session {session} server, then orcr doctor",
            )
        else:
            if self.driver_name == "herdr":
                self.can_run = False
            self.add("herdr protocol", "fail", str(exc), HERDR_INSTALL)

    def check_tmux(self) -> None:
        binary = str(self.config.get("tmux.binary") or "tmux")
        found = _which(binary)
        if found is None:
            self.add("tmux", "warn", f"tmux binary {binary!r} not found on PATH", TMUX_INSTALL)
            return
        out, err = _run_version(found, "-V")
        if out is None:
            self.add("tmux", "warn", err, TMUX_INSTALL)
            return
        m = re.search(r"(\d+)\.(\d+)", out)
        if m and (int(m.group(1)), int(m.group(2))) < (3, 2):
            self.add("tmux", "warn", f"{out} at {found} is older than 3.2", TMUX_INSTALL)
            return
        self.add("tmux", "ok", f"{out} at {found}")

    # -- providers -----------------------------------------------------------------------
    def check_provider(self, name: str) -> None:
        from orcr_core.versions import matches

        provider = self.registry.providers.get(name)
        if provider is None:
            return  # not installed as an adapter: nothing to run
        default, install = CLI_PROVIDERS[name]
        argv = self.config.provider_options(name).get("argv") or [default]
        program = argv[0] if isinstance(argv, list) else str(argv)
        found = _which(program)
        self.cli_found[name] = found is not None
        check = f"{name} cli"
        if found is None:
            self.add(
                check,
                "warn",
                f"{program!r} not found on PATH; --provider {name} agents cannot start",
                f"{install}, or set [providers.{name}] argv",
            )
            return
        out, err = _run_version(found)
        version = parse_version(out or "")
        if version is None:
            self.add(
                check,
                "warn",
                f"{found}: no version found ({err or out!r})",
                f"check that {found} --version works",
            )
            return
        spec = getattr(provider, "supported_versions", "")
        if matches(spec, version):
            self.add(check, "ok", f"{name} {version} at {found} (adapter supports {spec or 'any'})")
            return
        opts = self.config.provider_options(name)
        if opts.get("allow_unpinned"):
            self.add(
                check,
                "warn",
                f"{name} {version} at {found} is outside the adapter's range {spec}; "
                "runs degraded (allow_unpinned = true)",
                f"install a {name} version in {spec}, or upgrade orcr",
            )
            return
        self.add(
            check,
            "fail",
            f"{name} {version} at {found} is outside the adapter's range {spec}; "
            f"orcr ends its {name} agents failed (unsupported_provider_version)",
            f"install a {name} version in {spec}, upgrade orcr, or accept degraded runs: "
            f"orcr config set providers.{name}.allow_unpinned true",
        )

    def check_default_provider(self) -> None:
        name = self.config.get("agent.provider")
        check = "default provider"
        if name not in self.registry.providers:
            known = ", ".join(sorted(self.registry.providers)) or "none"
            self.add(
                check,
                "warn",
                f"agent.provider = {name!r} is not an installed provider: orcr agent run "
                "without --provider is refused",
                f"orcr config set agent.provider NAME (installed: {known})",
            )
        elif name in CLI_PROVIDERS and not self.cli_found.get(name):
            program = (self.config.provider_options(name).get("argv") or [CLI_PROVIDERS[name][0]])[
                0
            ]
            self.add(
                check,
                "warn",
                f"{name} (agent.provider) needs the {program!r} CLI, which is not found: "
                f"orcr agent run without --provider starts agents that end failed",
                f"{CLI_PROVIDERS[name][1]}, or choose another default: "
                "orcr config set agent.provider NAME",
            )
        else:
            self.add(check, "ok", f"{name} (agent.provider)")

    def check_integration(self, name: str) -> None:
        env_var, default, rel = INTEGRATIONS[name]
        home = self.config.provider_options(name).get("home")
        root = Path(os.path.expanduser(str(home or os.environ.get(env_var) or default)))
        hook = root / rel
        check = f"herdr {name} integration"
        if hook.is_file():
            m = re.search(r"HERDR_INTEGRATION_VERSION=\D*(\d+)", hook.read_text(errors="replace"))
            self.add(check, "ok", f"installed (v{m.group(1) if m else '?'}) at {hook}")
            return
        prefix = f"{env_var}={root} " if (home or os.environ.get(env_var)) else ""
        fix = f"{prefix}herdr integration install {name}"
        if name == "codex":
            why = "herdr reports Codex's thread id through it: without it orcr cannot find a codex transcript"
        else:
            why = "optional: orcr launches claude with --session-id, so it knows the session anyway"
        notify = self.config.provider_options(name).get("notify", True)
        if not self.cli_found.get(name):
            self.add(check, "ok", f"not installed ({hook} missing); {name} not found, not needed")
        elif name == "codex" and notify:
            self.add(
                check, "ok",
                f"not installed ({hook} missing); optional: orcr learns Codex's thread id "
                "through its notify program ([providers.codex] notify)",
            )  # fmt: skip
        elif name == "claude":
            self.add(check, "ok", f"not installed ({hook} missing); {why} ({fix})")
        elif self.driver_name not in (None, "herdr"):
            self.add(
                check,
                "warn",
                f"not installed ({hook} missing); codex agents need herdr and this integration: "
                f"under {self.driver_name} orcr cannot find a codex transcript, so their turns "
                "never end",
                f"{HERDR_INSTALL.split(', or use tmux')[0]}, then {fix}",
            )
        else:
            self.add(check, "warn", f"not installed ({hook} missing); {why}", fix)

    # -- orcr's own server and store -----------------------------------------------------
    def check_socket(self) -> None:
        import socket

        from orcr_core.client import Client, ServerError

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
            self._multiplexer(client.call("server.status").get("driver") or {})
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

    def _multiplexer(self, drv: dict) -> None:
        """The running server's view of its multiplexer (it restarts its own when gone)."""
        name = drv.get("name") or "-"
        if drv.get("healthy"):
            self.add("multiplexer", "ok", f"the server's {name} answers")
        else:
            self.add(
                "multiplexer",
                "warn",
                f"the server's {name} is unreachable: {drv.get('error')}; queued agents wait",
                "see orcr server status; orcr restarts its own multiplexer with backoff",
            )

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
