"""cgroup v2 with a delegated subtree: what ``orcr service install``'s unit
(``Delegate=yes``) gives the server.

NOT run against a real kernel: this project's machines have no memory, pids
or cpu controller on their unified hierarchy. It is tested against
:mod:`orcr_core.ceilings.mimic` (the kernel's file protocol on a temp tree)
by ``tests/test_ceilings_backends.py``; docs/ceilings.md says so.

Layout, under the server's own group ``D`` (``0::`` of ``/proc/self/cgroup``):

=============================  ==============================================
``D/``                         the delegated group: enables memory, pids and
                               cpu for its children, so it holds no process
``D/orcr-server/``             the server (and the multiplexer it starts) move
                               here first (the no-internal-process rule)
``D/orcr-<instance>/``         the fleet: ``memory.max`` = ``fleet_memory_max``
``D/orcr-<instance>/<uuid>/``  one agent: ``memory.max``, ``memory.high``,
                               ``pids.max``, ``cpu.weight``
=============================  ==============================================

The order is the kernel's: a controller is enabled in a parent's
``cgroup.subtree_control`` before its child's files exist, so the fleet's
``memory.max`` is written only after ``D`` enables memory, the agent's after
the fleet does. Read back: ``memory.current``, ``memory.peak`` (``memory.current``
on a kernel before 5.19), ``memory.events``' ``oom_kill``, ``pids.current``,
``pids.events``' ``max``.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
from collections.abc import Container

from orcr_core.ceilings.cgroupfs import KernelFs, keyed
from orcr_core.ceilings.hierarchy import open_root
from orcr_core.store import faults

WANTED = ("memory", "pids", "cpu")
REQUIRED = ("memory", "pids")
SERVER_LEAF = "orcr-server"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def delegated(fs: KernelFs) -> str:
    """The delegated group: the server's own, or its parent once the server moved
    itself into :data:`SERVER_LEAF` (a restarted server, a second instance)."""
    own = fs.own()
    if own.rstrip("/").endswith("/" + SERVER_LEAF):
        return own.rstrip("/")[: -len(SERVER_LEAF) - 1] or "/"
    return own


def unusable(fs: KernelFs | None = None) -> str | None:
    """Why a delegated v2 subtree cannot be used here, or None when it can."""
    try:
        fs = fs or open_root()
        if not fs.exists("/", "cgroup.controllers"):
            return f"no cgroup v2 hierarchy at {fs.root}"
        group = delegated(fs)
        if group.strip("/") == "":
            return "this process is in the cgroup v2 root, not in a delegated group"
        have = fs.read(group, "cgroup.controllers").split()
    except OSError as exc:
        return f"cgroup v2 unreadable: {exc}"
    missing = [c for c in REQUIRED if c not in have]
    if missing:
        return (
            f"cgroup v2 group {group} offers no {' or '.join(missing)} controller "
            f"(cgroup.controllers: {' '.join(have) or 'none'})"
        )
    if not fs.writable(group):
        return f"cgroup v2 group {group} is not delegated to this user (not writable)"
    if os.environ.get("INVOCATION_ID") and not fs.own().rstrip("/").endswith("/" + SERVER_LEAF):
        return (
            f"the server runs as a systemd service directly in {group}: once the fleet "
            "enables controllers there, a restart of the unit fails while agents live "
            f"(EBUSY, the no-internal-process rule); its unit needs DelegateSubgroup={SERVER_LEAF} "
            "(systemd 254+; `orcr service install` writes it there)"
        )
    return None


class CgroupV2:
    name = "cgroup_v2"

    def __init__(self, instance: str, fs: KernelFs | None = None) -> None:
        self.fs = fs or open_root()
        self.base = delegated(self.fs)
        self.fleet = f"{self.base.rstrip('/')}/orcr-{instance}"
        self.controllers = [c for c in WANTED if c in self._list(self.base, "cgroup.controllers")]

    def _list(self, group: str, file: str) -> list[str]:
        return self.fs.read(group, file).split()

    def group(self, uuid: str) -> str:
        return f"{self.fleet}/{uuid}"

    def _enable(self, group: str) -> None:
        missing = [
            c for c in self.controllers if c not in self._list(group, "cgroup.subtree_control")
        ]
        if missing:
            self.fs.write(group, "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))

    def ensure_fleet(self, fleet_max: int | None) -> None:
        """Move the delegated group's processes to its server leaf, enable the
        controllers down to the fleet, set the fleet's ceiling. Idempotent."""
        if not self._has_all(self.base):
            leaf = f"{self.base.rstrip('/')}/{SERVER_LEAF}"
            if not self.fs.exists(leaf):
                self.fs.mkdir(leaf)
            for pid in self.fs.read(self.base, "cgroup.procs").split():
                try:
                    self.fs.write(leaf, "cgroup.procs", pid)
                except ProcessLookupError:
                    pass  # exited meanwhile
            faults.point("v2_server_leaf")
            self._enable(self.base)
            faults.point("v2_controllers")
        if not self.fs.exists(self.fleet):
            self.fs.mkdir(self.fleet)
            faults.point("v2_fleet")
        self._enable(self.fleet)
        limit = str(fleet_max) if fleet_max else "max"
        self.fs.write(self.fleet, "memory.max", limit)

    def _has_all(self, group: str) -> bool:
        return all(c in self._list(group, "cgroup.subtree_control") for c in self.controllers)

    def create(self, uuid: str, limits) -> None:
        """The agent's group with its ceilings: idempotent (a resumed start runs it again)."""
        g = self.group(uuid)
        if not self.fs.exists(g):
            self.fs.mkdir(g)
            faults.point("v2_group")  # made, its ceilings not yet written
        self.fs.write(g, "memory.max", str(limits.memory_max or "max"))
        self.fs.write(g, "memory.high", str(limits.memory_high or "max"))
        self.fs.write(g, "pids.max", str(limits.pids_max or "max"))
        if "cpu" in self.controllers:
            self.fs.write(g, "cpu.weight", str(limits.cpu_weight or 100))

    def launch_prefix(self, uuid: str) -> list[str]:
        """The launch step: join the agent's group, then exec its argv (no shell)."""
        from orcr_core.ceilings import join

        procs = str(self.fs.path(self.group(uuid), "cgroup.procs"))
        return [sys.executable, "-I", "-S", join.__file__, procs, "--"]

    def _int(self, group: str, file: str) -> int | None:
        try:
            text = self.fs.read(group, file).strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def _memory(self, group: str) -> dict:
        peak = self._int(group, "memory.peak")
        return {
            "current": self._int(group, "memory.current"),
            "peak": peak if peak is not None else self._int(group, "memory.current"),
            "high": self._int(group, "memory.high"),
            "max": self._int(group, "memory.max"),
        }

    def usage(self, uuid: str) -> dict | None:
        g = self.group(uuid)
        if not self.fs.exists(g):
            return None
        return {
            "memory": self._memory(g),
            "pids": {
                "current": self._int(g, "pids.current"),
                "max": self._int(g, "pids.max"),
                "refused": keyed(self._read(g, "pids.events"), "max"),
            },
            "oom_kills": keyed(self._read(g, "memory.events"), "oom_kill"),
        }

    def refused(self, uuid: str) -> int | None:
        """Forks the agent's pids ceiling refused: ``usage()["pids"]["refused"]``, one
        file read (the reconciliation pass asks it of every live agent)."""
        text = self._read(self.group(uuid), "pids.events")
        return None if text is None else keyed(text, "max")

    def _read(self, group: str, file: str) -> str | None:
        try:
            return self.fs.read(group, file)
        except OSError:
            return None

    def oom(self, uuid: str) -> dict | None:
        """What the kernel did at the agent's ceiling: None when it killed nothing."""
        from orcr_core.ceilings.v1 import oom_report

        return oom_report(self.usage(uuid), self.fleet_usage, uuid)

    def remove(self, uuid: str) -> bool:
        """Remove the agent's group; False while a process is still in it."""
        try:
            self.fs.rmdir(self.group(uuid))
        except FileNotFoundError:
            return True
        except OSError:
            return False
        faults.point("group_removed")
        return True

    def _kill(self, group: str) -> None:
        try:
            self.fs.write(group, "cgroup.kill", "1")  # Linux 5.14+: the whole subtree
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EACCES):
                raise
        for pid in (self._read(group, "cgroup.procs") or "").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass

    def sweep(self, live: Container[str]) -> list[str]:
        """Groups of agents that are not live: their processes killed, the groups removed."""
        removed = []
        for name in self.fs.children(self.fleet):
            if not _UUID.fullmatch(name) or name in live:
                continue
            self._kill(self.group(name))
            if self.remove(name):
                removed.append(name)
        return removed

    def drop_fleet(self) -> None:
        """At a clean stop: the fleet's group, if no agent's group is left in it."""
        try:
            self.fs.rmdir(self.fleet)
        except OSError:
            pass

    def drop_all(self, wait: float = 2.0) -> None:
        import time

        deadline = time.monotonic() + wait
        while self.sweep(set()) or self.fs.children(self.fleet):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.drop_fleet()

    def fleet_usage(self) -> dict:
        return {
            **{k: v for k, v in self._memory(self.fleet).items() if k != "high"},
            "oom_kills": keyed(self._read(self.fleet, "memory.events"), "oom_kill"),
        }
