"""Write, enable, remove and report the per-user service (systemd or launchd).

Each manager answers ``install()`` and ``uninstall()`` with the lines to print
(what it did and how to undo it) and raises :class:`ServiceError` with the fix
when a step fails; ``status()`` never raises. The unit is named after this
orcr instance (``orcr`` for the default data directory, ``orcr-<instance id>``
under ``ORCR_HOME``, like the multiplexer's session), so side-by-side homes
get side-by-side services.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from orcr_core import dirs
from orcr_core.server import lockfile
from orcr_core.service import units

CALL_TIMEOUT = 30.0  # seconds for one systemctl / launchctl call
SERVER_STOP_TIMEOUT = 30.0


class ServiceError(Exception):
    """A step failed; the message says what was done so far and the fix."""


def _run(argv: list[str]) -> tuple[int | None, str]:
    """(exit status, output) of a manager command; None when it cannot run at all."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} is not installed"
    try:
        r = subprocess.run(
            argv, capture_output=True, text=True, timeout=CALL_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    return r.returncode, ((r.stdout or "") + (r.stderr or "")).strip()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def stop_cli_server() -> int | None:
    """Stop a server the CLI autostarted (the service's own would fail beside it):
    SIGTERM to the lock holder, then wait. Its agents keep running. The pid, or None."""
    import signal

    held = lockfile.holder()
    if held is None or held.pid is None:
        return None
    try:
        os.kill(held.pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + SERVER_STOP_TIMEOUT
    while not (lockfile.pid_gone(held.pid) and lockfile.holder() is None):
        if time.monotonic() > deadline:
            raise ServiceError(
                f"the running orcr server {held.pid} did not stop within "
                f"{SERVER_STOP_TIMEOUT:.0f}s; stop it (orcr server stop), then run this again"
            )
        time.sleep(0.05)
    return held.pid


class Systemd:
    kind = "systemd"

    def __init__(self) -> None:
        self.name = f"{dirs.mux_name()}.service"
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        self.path = Path(base) / "systemd" / "user" / self.name

    def text(self) -> str:
        subgroup = (units.systemd_version() or 0) >= units.SUBGROUP_SINCE
        return units.systemd_unit(units.orcr_argv(), units.service_env(), subgroup=subgroup)

    def _ctl(self, *args: str) -> tuple[int | None, str]:
        return _run(["systemctl", "--user", *args])

    def install(self) -> list[str]:
        _write(self.path, self.text())
        done = [f"wrote {self.path}"]
        rc, out = self._ctl("daemon-reload")
        if rc != 0:
            raise ServiceError(
                f"wrote {self.path}, but systemctl --user could not reload: {out}. Once your "
                f"user's systemd runs: systemctl --user daemon-reload && systemctl --user "
                f"enable --now {self.name}. Undo: orcr service uninstall"
            )
        rc, out = self._ctl("enable", self.name)
        if rc != 0:
            raise ServiceError(f"wrote {self.path}, but enabling it failed: {out}")
        done.append(f"enabled {self.name} (starts with your user session)")
        active, _ = self._ctl("is-active", "--quiet", self.name)
        if active == 0:
            verb = "restart"
        else:
            verb = "start"
            pid = stop_cli_server()
            if pid is not None:
                done.append(
                    f"stopped the orcr server {pid} the CLI had started (agents keep running)"
                )
        rc, out = self._ctl(verb, self.name)
        if rc != 0:
            raise ServiceError(
                f"{self.name} is written and enabled, but would not {verb}: {out}; "
                f"see journalctl --user -u {self.name}"
            )
        done.append(f"{verb}ed {self.name}; its log: journalctl --user -u {self.name}")
        if linger() is False:
            user = getpass.getuser()
            done.append(
                f"lingering is off: the server stops when you log out; keep it running: "
                f"loginctl enable-linger {user}"
            )
        done.append("undo: orcr service uninstall")
        return done

    def uninstall(self) -> list[str]:
        done = []
        rc, out = self._ctl("disable", "--now", self.name)
        if rc == 0:
            done.append(f"stopped and disabled {self.name} (agents keep running)")
        elif self.path.exists():
            done.append(f"systemctl --user disable --now {self.name} failed: {out}")
        if self.path.exists():
            self.path.unlink()
            done.append(f"removed {self.path}")
            self._ctl("daemon-reload")
        if not done:
            done.append(f"{self.name} was not installed ({self.path} does not exist)")
        done.append("the CLI starts a server when a command needs one, as before")
        return done

    def status(self) -> dict:
        installed = self.path.exists()
        s = {
            "manager": self.kind,
            "unit": self.name,
            "path": str(self.path),
            "installed": installed,
            "current": installed and self.path.read_text() == self.text(),
            "enabled": None,
            "running": None,
            "linger": linger(),
            "error": None,
        }
        rc, out = self._ctl("is-enabled", self.name)  # answered from the files, bus or not
        if rc is None:
            s["error"] = out
            return s
        s["enabled"] = rc == 0
        rc, out = self._ctl("is-active", self.name)
        if rc is None or "Failed to connect" in out:
            s["error"] = f"systemctl --user does not answer ({out}): is running unknown"
        else:
            s["running"] = rc == 0
        return s


def linger() -> bool | None:
    """Whether systemd keeps this user's services running after logout (None: unknown)."""
    user = getpass.getuser()
    marks = Path("/var/lib/systemd/linger")
    if marks.is_dir():
        return (marks / user).exists()
    rc, out = _run(["loginctl", "show-user", user, "--property=Linger", "--value"])
    return {"yes": True, "no": False}.get(out.strip()) if rc == 0 else None


class Launchd:
    kind = "launchd"

    def __init__(self) -> None:
        suffix = "" if dirs.mux_name() == "orcr" else "." + dirs.mux_name()
        self.label = units.LAUNCHD_LABEL + suffix
        self.name = self.label
        self.path = Path.home() / "Library" / "LaunchAgents" / f"{self.label}.plist"
        self.domain = f"gui/{os.getuid()}"

    def text(self) -> str:
        return units.launchd_plist(units.orcr_argv(), units.service_env(), self.log(), self.label)

    def log(self) -> Path:
        return dirs.run_dir() / "launchd.log"

    def install(self) -> list[str]:
        _write(self.path, self.text())
        done = [f"wrote {self.path}"]
        _run(["launchctl", "bootout", f"{self.domain}/{self.label}"])  # a previous version
        stop_cli_server()
        rc, out = _run(["launchctl", "bootstrap", self.domain, str(self.path)])
        if rc != 0:
            raise ServiceError(
                f"wrote {self.path}, but launchctl bootstrap failed: {out}. Undo: orcr "
                "service uninstall"
            )
        done += [f"loaded {self.label} (starts at login; its log: {self.log()})"]
        done.append("undo: orcr service uninstall")
        return done

    def uninstall(self) -> list[str]:
        done = []
        rc, _out = _run(["launchctl", "bootout", f"{self.domain}/{self.label}"])
        if rc == 0:
            done.append(f"unloaded {self.label} (agents keep running)")
        if self.path.exists():
            self.path.unlink()
            done.append(f"removed {self.path}")
        if not done:
            done.append(f"{self.label} was not installed ({self.path} does not exist)")
        return done

    def status(self) -> dict:
        installed = self.path.exists()
        rc, out = _run(["launchctl", "print", f"{self.domain}/{self.label}"])
        return {
            "manager": self.kind,
            "unit": self.label,
            "path": str(self.path),
            "installed": installed,
            "current": installed and self.path.read_text() == self.text(),
            "enabled": None if rc is None else rc == 0,
            "running": None if rc is None else (rc == 0 and "state = running" in out),
            "linger": None,  # launchd agents run while the user is logged in
            "error": out if rc is None else None,
        }


def manager(kind: str | None = None):
    """The service manager for ``kind`` (``systemd``, ``launchd``), else this platform's."""
    if kind is None:
        kind = "launchd" if sys.platform == "darwin" else "systemd"
    return {"systemd": Systemd, "launchd": Launchd}[kind]()


def doctor_row(s: dict) -> tuple[str, str, str | None]:
    """``orcr doctor``'s row for the service: (level, detail, fix)."""
    where = f"{s['manager']} {s['unit']}"
    if not s["installed"]:
        return (
            "ok",
            f"{where} not installed: the CLI starts a server when a command needs one, "
            "so loops do not fire after a reboot until then",
            "orcr service install",
        )
    problems = []
    if not s["current"]:
        problems.append(f"{s['path']} differs from what orcr service install writes now")
    if s["enabled"] is False:
        problems.append("not enabled")
    if s["running"] is False:
        problems.append("not running")
    if s["linger"] is False:
        problems.append("lingering is off (the server stops at logout)")
    if problems:
        fix = "orcr service install" + (
            f"; loginctl enable-linger {getpass.getuser()}" if s["linger"] is False else ""
        )
        return "warn", f"{where}: " + "; ".join(problems), fix
    return "ok", f"{where} installed, enabled, running", None
