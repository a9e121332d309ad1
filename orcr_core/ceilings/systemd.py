"""A systemd user manager without delegation: one transient scope per agent.

NOT run against a real systemd here: this project's machines run no systemd
(PID 1 is not systemd, ``systemctl --user`` finds no bus). It is tested against
a fake ``systemd-run``/``systemctl`` (``tests/fakes/fake_systemd.py``) that
follows the documented protocol of systemd-run(1), systemctl(1) and
systemd.resource-control(5); docs/ceilings.md says so.

The launch step is ``systemd-run --user --scope --quiet --unit=<scope>
--slice=<fleet slice> -p MemoryMax=... -p MemoryHigh=... -p TasksMax=...
-p CPUWeight=... -- ARGV``: for ``--scope`` systemd-run asks the manager for
the scope with itself in it, then runs the command in its own process, so the
agent's first instruction is inside its scope (an argv list, no shell). A
scope systemd-run cannot make is fatal: it exits non-zero and the agent never
runs. The fleet is the slice ``orcr-<instance>.slice`` (MemoryMax from
``systemctl --user set-property --runtime``). No ``--collect``: a scope the
OOM killer ended stays loaded as ``failed`` with ``Result=oom-kill`` until
orcr reads it and runs ``reset-failed``.

The ceilings of an agent are kept from :meth:`create` to its launch in a small
JSON file per agent under ``state_dir`` (a restored agent's launch needs them
after a server restart).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Container
from pathlib import Path

SHOWN = ("LoadState", "ActiveState", "Result", "MemoryCurrent", "MemoryPeak", "MemoryHigh",
         "MemoryMax", "TasksCurrent", "TasksMax", "CPUWeight")  # fmt: skip
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
TIMEOUT = 10
#: readings for status and top are shared for this long: one ``systemctl show`` of
#: every agent's scope, not one process per agent per status
CACHE_FOR = 1.0


def _systemctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["systemctl", "--user", *args], capture_output=True, text=True, timeout=TIMEOUT
    )


def _num(value: str | None) -> int | None:
    """A byte or task count as ``systemctl show`` prints it (``infinity``,
    ``[not set]`` and 2^64-1 mean none)."""
    if value is None or not value.isdigit():
        return None
    n = int(value)
    return None if n >= 2**63 else n


def unusable() -> str | None:
    """Why a systemd user manager cannot hold ceilings here, or None."""
    from orcr_core.ceilings.hierarchy import open_root

    if shutil.which("systemd-run") is None or shutil.which("systemctl") is None:
        return "systemd-run or systemctl not found"
    try:
        r = _systemctl("show", "-p", "ControlGroup")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"systemctl --user: {exc}"
    if r.returncode != 0:
        return f"no systemd user manager (systemctl --user: {r.stderr.strip() or r.returncode})"
    group = r.stdout.strip().partition("=")[2]
    try:
        have = open_root().read(group, "cgroup.controllers").split()
    except OSError:
        return f"the user manager's group {group or '?'} is not on a cgroup v2 hierarchy"
    if "memory" not in have or "pids" not in have:
        return (
            f"the user manager's group {group} has no memory or pids controller "
            f"(cgroup.controllers: {' '.join(have) or 'none'}): MemoryMax= would not hold"
        )
    return None


class SystemdScopes:
    name = "systemd"

    def __init__(self, instance: str, state_dir: str | os.PathLike) -> None:
        self.slice = f"orcr-{instance}.slice"
        self.prefix = f"orcr-{instance}-"
        self.state = Path(state_dir)
        self._fleet_max: object = ()  # the last fleet ceiling set (() = none yet)
        self._cache: dict[str, dict[str, str]] = {}
        self._cache_at = 0.0

    def scope(self, uuid: str) -> str:
        return f"{self.prefix}{uuid}.scope"

    def ensure_fleet(self, fleet_max: int | None) -> None:
        if fleet_max == self._fleet_max:
            return
        value = str(fleet_max) if fleet_max else "infinity"
        r = _systemctl("set-property", "--runtime", self.slice, f"MemoryMax={value}")
        if r.returncode != 0:
            raise OSError(f"systemctl --user set-property {self.slice}: {r.stderr.strip()}")
        self._fleet_max = fleet_max

    def _stash(self, uuid: str) -> Path:
        return self.state / f"{uuid}.json"

    def create(self, uuid: str, limits) -> None:
        """Keep the ceilings for the launch step (systemd makes the scope there)."""
        self.state.mkdir(parents=True, exist_ok=True)
        tmp = self._stash(uuid).with_suffix(".tmp")
        tmp.write_text(json.dumps(limits.as_dict()))
        os.replace(tmp, self._stash(uuid))
        self._cache_at = 0.0

    def properties(self, uuid: str) -> list[str]:
        """The scope's resource-control assignments (systemd.resource-control(5))."""
        try:
            lim = json.loads(self._stash(uuid).read_text())
        except (OSError, ValueError):
            lim = {}
        return [
            f"MemoryMax={lim.get('memory_max') or 'infinity'}",
            f"MemoryHigh={lim.get('memory_high') or 'infinity'}",
            f"TasksMax={lim.get('pids_max') or 'infinity'}",
            f"CPUWeight={lim.get('cpu_weight') or 100}",
        ]

    def launch_prefix(self, uuid: str) -> list[str]:
        argv = ["systemd-run", "--user", "--scope", "--quiet",
                f"--unit={self.scope(uuid)}", f"--slice={self.slice}"]  # fmt: skip
        for prop in self.properties(uuid):
            argv += ["-p", prop]
        return [*argv, "--"]

    def _show_many(self, units: list[str]) -> dict[str, dict[str, str]]:
        """``systemctl show`` of several units: one block each, in order, blank-line apart."""
        r = _systemctl("show", *units, *(f"--property={p}" for p in SHOWN))
        blocks: list[dict[str, str]] = [{}]
        for line in r.stdout.splitlines():
            if not line.strip():
                blocks.append({})
                continue
            key, _, value = line.partition("=")
            blocks[-1][key] = value
        blocks = [b for b in blocks if b]
        return dict(zip(units, blocks, strict=False))

    def _show(self, unit: str) -> dict[str, str]:
        return self._show_many([unit]).get(unit, {})

    def _cached(self, unit: str) -> dict[str, str]:
        if unit not in self._cache or time.monotonic() - self._cache_at > CACHE_FOR:
            known = {self.scope(p.stem) for p in self.state.glob("*.json")}
            units = sorted(known | {unit})
            self._cache, self._cache_at = self._show_many(units), time.monotonic()
        return self._cache.get(unit, {})

    def usage(self, uuid: str, fresh: bool = False) -> dict | None:
        """The scope's readings; shared for :data:`CACHE_FOR` unless ``fresh``."""
        s = self._show(self.scope(uuid)) if fresh else self._cached(self.scope(uuid))
        if s.get("LoadState") != "loaded" and not self._stash(uuid).exists():
            return None
        limits = {}
        if s.get("LoadState") != "loaded":  # not launched yet, or gone: what it will get
            limits = dict(p.split("=", 1) for p in self.properties(uuid))
        return {
            "memory": {
                "current": _num(s.get("MemoryCurrent")),
                "peak": _num(s.get("MemoryPeak")),  # systemd 256+; else not reported
                "high": _num(limits.get("MemoryHigh", s.get("MemoryHigh"))),
                "max": _num(limits.get("MemoryMax", s.get("MemoryMax"))),
            },
            "pids": {
                "current": _num(s.get("TasksCurrent")),
                "max": _num(limits.get("TasksMax", s.get("TasksMax"))),
                # systemd keeps no count of refused forks: unknown, so a scope found
                # at TasksMax reads "process ceiling N reached" (step.pids_note)
                "refused": None,
            },
            "oom_kills": 1 if s.get("Result") == "oom-kill" else 0,
        }

    def refused(self, uuid: str) -> int | None:
        """systemd keeps no count of refused forks (see :meth:`usage`)."""
        return None

    def oom(self, uuid: str) -> dict | None:
        """The scope's ``Result=oom-kill`` as the verdict (systemd names no victim)."""
        from orcr_core.ceilings.v1 import oom_report

        return oom_report(self.usage(uuid, fresh=True), self.fleet_usage, None)

    def remove(self, uuid: str) -> bool:
        """Forget an ended agent's scope; False while it still runs. The scope goes
        first, its kept ceilings last: a crash between them leaves the file, which
        the next sweep finds and removes (its uuid is no live agent's)."""
        from orcr_core.store import faults

        unit = self.scope(uuid)
        if self._show(unit).get("ActiveState") in ("active", "activating", "deactivating"):
            return False
        _systemctl("reset-failed", unit)  # a failed scope stays loaded until this
        faults.point("group_removed")
        self._stash(uuid).unlink(missing_ok=True)
        self._cache_at = 0.0
        return True

    def sweep(self, live: Container[str]) -> list[str]:
        """Scopes (and kept ceilings) of agents that are not live: killed, forgotten."""
        r = _systemctl("list-units", "--type=scope", "--all", "--plain", "--no-legend",
                       f"{self.prefix}*.scope")  # fmt: skip
        found = set()
        for line in r.stdout.splitlines():
            m = re.fullmatch(re.escape(self.prefix) + f"({_UUID})\\.scope", line.split()[0])
            if m:
                found.add(m.group(1))
        if self.state.is_dir():
            found |= {p.stem for p in self.state.glob("*.json") if re.fullmatch(_UUID, p.stem)}
        removed = []
        for uuid in sorted(u for u in found if u not in live):
            _systemctl("kill", "--signal=SIGKILL", self.scope(uuid))
            _systemctl("stop", self.scope(uuid))
            if self.remove(uuid):
                removed.append(uuid)
        return removed

    def drop_fleet(self) -> None:
        pass  # a slice without units holds nothing; the manager keeps it harmlessly

    def drop_all(self, wait: float = 2.0) -> None:
        self.sweep(set())

    def fleet_usage(self) -> dict:
        s = self._show(self.slice)
        return {
            "current": _num(s.get("MemoryCurrent")),
            "peak": _num(s.get("MemoryPeak")),
            "max": _num(s.get("MemoryMax")),
            "oom_kills": None,  # per scope only (Result=oom-kill)
        }
