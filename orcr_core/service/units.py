"""The text of the systemd user unit and of the launchd agent.

Pure functions of what to run and with which environment, so a test can check
the text on any machine (``systemd-analyze verify`` for the unit, plistlib for
the agent).
"""

from __future__ import annotations

import os
import plistlib
import sys
from pathlib import Path

#: systemd: seconds between a failure and the restart; at most BURST starts in INTERVAL
RESTART_SEC = 5
START_LIMIT_BURST = 5
START_LIMIT_INTERVAL = 600
#: systemd sends SIGTERM, then SIGKILL after this many seconds. The server stops
#: in well under a second; its agents keep running (KillMode=process).
STOP_TIMEOUT = 30
LAUNCHD_LABEL = "io.orcr.server"
#: launchd: seconds it waits before starting the agent again after it exited
LAUNCHD_THROTTLE = 10


def orcr_argv() -> list[str]:
    """The absolute command that runs this orcr's server in the foreground.

    The ``orcr`` script beside this interpreter (a venv's ``bin/``), else the
    interpreter itself with ``-m orcr_core.cli``. Not resolved through
    symlinks: a venv's ``python`` is a symlink to the system one, which would
    lose the venv.
    """
    exe = Path(sys.executable).absolute()
    script = exe.parent / "orcr"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "server", "start", "--foreground"]
    return [str(exe), "-m", "orcr_core.cli", "server", "start", "--foreground"]


def service_env(environ: dict | None = None) -> dict[str, str]:
    """``PATH`` as the installing shell had it, and ``ORCR_HOME`` when set."""
    environ = os.environ if environ is None else environ
    env = {"PATH": environ.get("PATH") or os.defpath}
    home = environ.get("ORCR_HOME")
    if home:
        env["ORCR_HOME"] = str(Path(home).expanduser().absolute())
    return env


def _systemd_quote(word: str) -> str:
    """One word of a systemd command line or assignment: specifiers (``%``) are
    escaped, and a word with spaces, quotes or backslashes is double-quoted."""
    word = word.replace("%", "%%")
    if word and not any(c in word for c in " \t\"\\'$;"):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: systemd 254 added ``DelegateSubgroup=``: the server then starts in a leaf of its
#: delegated group, so a restart never meets the no-internal-process rule
SUBGROUP_SINCE = 254
SUBGROUP = "orcr-server"  # the cgroup v2 ceilings' server leaf (ceilings/v2.py)


def systemd_version() -> int | None:
    """The local systemd's version (``systemctl --version``), or None."""
    import re
    import subprocess

    try:
        out = subprocess.run(
            ["systemctl", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.match(r"systemd (\d+)", out)
    return int(m.group(1)) if m else None


def systemd_unit(argv: list[str], env: dict[str, str], subgroup: bool = False) -> str:
    """The ``orcr.service`` user unit.

    ``Restart=on-failure`` with a start limit; ``KillMode=process`` because the
    multiplexer server orcr starts (tmux, herdr) and the agents in its panes
    must outlive a stop or a restart of orcr's server, as they do outside
    systemd. ``Delegate=yes`` hands the unit's cgroup v2 subtree to the server,
    which makes its fleet and one group per agent there (the ``cgroup_v2``
    ceilings mechanism, orcr_core/ceilings/v2.py). ``subgroup`` (systemd 254+)
    adds ``DelegateSubgroup=orcr-server``: without it, a restart while agents
    live in the fleet would fail (the unit's group then enables controllers and
    may hold no process), so the server does not use cgroup v2 there.
    """
    exec_start = " ".join(_systemd_quote(w) for w in argv)
    lines = [
        "# Written by `orcr service install`; `orcr service uninstall` removes it.",
        "[Unit]",
        "Description=orcr server (runs coding-agent TUIs, loops and the task queue)",
        "Documentation=man:systemd.service(5)",
        f"StartLimitIntervalSec={START_LIMIT_INTERVAL}",
        f"StartLimitBurst={START_LIMIT_BURST}",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={exec_start}",
        "Restart=on-failure",
        f"RestartSec={RESTART_SEC}",
        f"TimeoutStopSec={STOP_TIMEOUT}",
        "KillMode=process",
        "Delegate=yes",
        *([f"DelegateSubgroup={SUBGROUP}"] if subgroup else []),
    ]
    lines += [f"Environment={_systemd_quote(f'{k}={v}')}" for k, v in sorted(env.items())]
    lines += ["", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def launchd_plist(
    argv: list[str], env: dict[str, str], log: Path, label: str = LAUNCHD_LABEL
) -> str:
    """The launchd agent: started at login, started again when it exits with a
    failure (``KeepAlive.SuccessfulExit = false``), stderr kept in ``log``."""
    plist = {
        "Label": label,
        "ProgramArguments": list(argv),
        "EnvironmentVariables": dict(env),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": LAUNCHD_THROTTLE,
        "ExitTimeOut": STOP_TIMEOUT,
        "ProcessType": "Background",
        "AbandonProcessGroup": True,  # the multiplexer and its agents outlive a stop
        "StandardOutPath": str(log),
        "StandardErrorPath": str(log),
    }
    return plistlib.dumps(plist, sort_keys=False).decode()
