"""``orcr doctor``'s multiplexer rows: the chosen driver, herdr and its protocol, tmux,
and the running server's view of its multiplexer."""

from __future__ import annotations

import re
import threading

from orcr_core.cli.doctor_probe import parse_version, run_version, which
from orcr_core.cli.output import capabilities

HANDSHAKE_TIMEOUT = 5.0
HERDR_INSTALL = (
    "install herdr 0.9 (or 0.8; https://herdr.dev) and put it on PATH (or set herdr.binary), "
    'or use tmux instead: orcr config set driver.name "auto"'
)
TMUX_INSTALL = "install tmux >= 3.2 (apt-get install tmux / dnf install tmux / brew install tmux)"


class MultiplexerChecks:
    """Mixed into :class:`orcr_core.cli.doctor.Doctor` (its ``config``, ``registry``,
    ``driver_name``, ``can_run`` and ``add``)."""

    # -- multiplexers --------------------------------------------------------------------
    def check_driver(self) -> None:
        from orcr_core.pm.drivers import INSTALL_HINT, NoDriver, choose_driver

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
        found = which(binary)
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
        out, err = run_version(found)
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
        found = which(binary)
        if found is None:
            self.add("tmux", "warn", f"tmux binary {binary!r} not found on PATH", TMUX_INSTALL)
            return
        out, err = run_version(found, "-V")
        if out is None:
            self.add("tmux", "warn", err, TMUX_INSTALL)
            return
        m = re.search(r"(\d+)\.(\d+)", out)
        if m and (int(m.group(1)), int(m.group(2))) < (3, 2):
            self.add("tmux", "warn", f"{out} at {found} is older than 3.2", TMUX_INSTALL)
            return
        self.add("tmux", "ok", f"{out} at {found}")

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
