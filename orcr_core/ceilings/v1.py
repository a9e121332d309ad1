"""cgroup v1: the memory, pids and cpu controllers, each its own hierarchy.

The fleet is ``orcr-<instance id>`` under the server's own group in each
controller (``/proc/self/cgroup``), so orcr stays inside whatever group it was
started in and the server itself is outside the fleet. Each agent is
``<fleet>/<agent uuid>``. Files written:

====================  ================================  =========================
ceiling               file                              value
====================  ================================  =========================
memory_max            memory.limit_in_bytes             bytes
memory_high           memory.soft_limit_in_bytes        bytes (reclaimed first
                                                        under machine pressure)
pids_max              pids.max                          count
cpu_weight            cpu.shares                        weight * 1024 / 100
fleet_memory_max      <fleet>/memory.limit_in_bytes     bytes
====================  ================================  =========================

Read back: ``memory.usage_in_bytes`` (current), ``memory.max_usage_in_bytes``
(peak), ``memory.oom_control``'s ``oom_kill`` (kills inside the group),
``pids.current`` and ``pids.events``' ``max`` (forks refused).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
from collections.abc import Container
from pathlib import Path

from orcr_core.ceilings.cgroupfs import keyed

ROOT = Path(os.environ.get("ORCR_CGROUP_V1_ROOT", "/sys/fs/cgroup"))
CONTROLLERS = ("memory", "pids", "cpu")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: the kernel's line naming an OOM kill's group, task and pid
_KILL = re.compile(r"oom-kill:.*task_memcg=(?P<cg>[^,]*),task=(?P<task>[^,]*),pid=(?P<pid>\d+)")


def own(controller: str) -> str:
    """This process's group in ``controller`` (``/`` when it is the root)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(","):
                return path
    return "/"


def unusable() -> str | None:
    """Why cgroup v1 cannot be used here, or None when it can."""
    for c in CONTROLLERS:
        base = ROOT / c
        probe = {"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpu": "cpu.shares"}[c]
        if not (base / "cgroup.procs").exists() or not (base / probe).exists():
            # pids.max lives only in child groups: its root has cgroup.procs alone
            if not (c == "pids" and (base / "cgroup.procs").exists()):
                return f"no cgroup v1 {c} controller mounted at {base}"
        home = base / own(c).lstrip("/")
        if not os.access(home, os.W_OK):
            return f"cgroup v1 {c} group {home} is not writable by this user"
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text.split()[0]) if text else None
    except ValueError:
        return None


def _keyed(path: Path, key: str) -> int:
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return int(parts[1])
    return 0


class CgroupV1:
    name = "cgroup_v1"

    def __init__(self, instance: str) -> None:
        self.fleet_name = f"orcr-{instance}"
        self.fleets = {c: ROOT / c / own(c).lstrip("/") / self.fleet_name for c in CONTROLLERS}

    def group(self, controller: str, uuid: str) -> Path:
        return self.fleets[controller] / uuid

    def ensure_fleet(self, fleet_max: int | None) -> None:
        """The fleet's groups, and its memory ceiling (None: unlimited)."""
        for path in self.fleets.values():
            path.mkdir(exist_ok=True)
        limit = str(fleet_max) if fleet_max else "-1"
        try:
            (self.fleets["memory"] / "memory.limit_in_bytes").write_text(limit)
        except OSError as exc:  # EBUSY: the fleet already uses more than the new ceiling
            if exc.errno != errno.EBUSY:
                raise

    def create(self, uuid: str, limits) -> None:
        """The agent's groups with its ceilings: idempotent (a resumed start runs it again)."""
        for c in CONTROLLERS:
            self.group(c, uuid).mkdir(exist_ok=True)
        mem = self.group("memory", uuid)
        (mem / "memory.limit_in_bytes").write_text(str(limits.memory_max or -1))
        (mem / "memory.soft_limit_in_bytes").write_text(str(limits.memory_high or -1))
        pids = limits.pids_max if limits.pids_max else "max"
        (self.group("pids", uuid) / "pids.max").write_text(str(pids))
        shares = max(2, (limits.cpu_weight or 100) * 1024 // 100)
        (self.group("cpu", uuid) / "cpu.shares").write_text(str(shares))

    def launch_prefix(self, uuid: str) -> list[str]:
        """The launch step: join these groups, then exec the agent's argv (no shell)."""
        from orcr_core.ceilings import join

        procs = [str(self.group(c, uuid) / "cgroup.procs") for c in CONTROLLERS]
        return [sys.executable, "-I", "-S", join.__file__, *procs, "--"]

    def usage(self, uuid: str) -> dict | None:
        mem = self.group("memory", uuid)
        if not mem.is_dir():
            return None
        limit = _int(mem / "memory.limit_in_bytes")
        high = _int(mem / "memory.soft_limit_in_bytes")
        huge = 2**62
        pids_max = (_read(self.group("pids", uuid) / "pids.max") or "max").strip()
        return {
            "memory": {
                "current": _int(mem / "memory.usage_in_bytes"),
                "peak": _int(mem / "memory.max_usage_in_bytes"),
                "high": high if high and high < huge else None,
                "max": limit if limit and limit < huge else None,
            },
            "pids": {
                "current": _int(self.group("pids", uuid) / "pids.current"),
                "max": int(pids_max) if pids_max.isdigit() else None,
                "refused": _keyed(self.group("pids", uuid) / "pids.events", "max"),
            },
            "oom_kills": _keyed(mem / "memory.oom_control", "oom_kill"),
        }

    def refused(self, uuid: str) -> int | None:
        """Forks the agent's pids ceiling refused: ``usage()["pids"]["refused"]``, one
        file read (the reconciliation pass asks it of every live agent)."""
        text = _read(self.group("pids", uuid) / "pids.events")
        return None if text is None else keyed(text, "max")

    def oom(self, uuid: str) -> dict | None:
        """What the kernel did at the agent's ceiling: None when it killed nothing."""
        return oom_report(self.usage(uuid), self.fleet_usage, uuid)

    def remove(self, uuid: str) -> bool:
        """Remove the agent's groups; False while a process is still in one."""
        from orcr_core.store import faults

        gone = True
        for c in CONTROLLERS:
            try:
                self.group(c, uuid).rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                gone = False
                continue
            faults.point("group_removed")  # the first: the others still there
        return gone

    def sweep(self, live: Container[str]) -> list[str]:
        """Groups of agents that are not live: their leftover processes are killed
        and the groups removed (a crash between a group made and its agent's end)."""
        removed = []
        for c in CONTROLLERS:
            try:
                names = [p.name for p in self.fleets[c].iterdir() if p.is_dir()]
            except FileNotFoundError:
                continue
            for name in names:
                if not _UUID.fullmatch(name) or name in live:
                    continue
                for pid in (_read(self.fleets[c] / name / "cgroup.procs") or "").split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                try:
                    (self.fleets[c] / name).rmdir()
                    removed.append(f"{c}/{name}")
                except OSError:
                    pass  # its processes are still exiting: the next sweep
        return removed

    def drop_fleet(self) -> None:
        """At a clean stop: the fleet's own groups, if no agent group is left in them."""
        for path in self.fleets.values():
            try:
                path.rmdir()
            except OSError:
                pass

    def drop_all(self, wait: float = 2.0) -> None:
        """An instance gone for good (a test's, a bench's): every group of it, its
        processes killed; waits up to ``wait`` seconds for them to exit."""
        import time

        deadline = time.monotonic() + wait
        self.sweep(set())
        while self._agent_groups() and time.monotonic() < deadline:
            time.sleep(0.05)
            self.sweep(set())
        self.drop_fleet()

    def _agent_groups(self) -> list[Path]:
        out: list[Path] = []
        for path in self.fleets.values():
            try:
                out += [p for p in path.iterdir() if p.is_dir() and _UUID.fullmatch(p.name)]
            except FileNotFoundError:
                pass
        return out

    def fleet_usage(self) -> dict:
        mem = self.fleets["memory"]
        limit = _int(mem / "memory.limit_in_bytes")
        return {
            "current": _int(mem / "memory.usage_in_bytes"),
            "peak": _int(mem / "memory.max_usage_in_bytes"),
            "max": limit if limit and limit < 2**62 else None,
            "oom_kills": _keyed(mem / "memory.oom_control", "oom_kill"),
        }


def oom_report(usage: dict | None, fleet_usage, uuid: str | None) -> dict | None:
    """An agent's OOM verdict from its ``usage()``, shared by the backends: None when the
    kernel killed nothing; its ceiling, peak and kills, the fleet's ceiling (``fleet_usage``
    is called only then), and, given ``uuid``, the victim from the kernel log."""
    if not usage or not usage["oom_kills"]:
        return None
    out = {"max": usage["memory"]["max"], "peak": usage["memory"]["peak"]}
    out.update(kills=usage["oom_kills"], fleet_max=fleet_usage()["max"])
    if uuid is not None:
        out.update(victim(uuid) or {})
    return out


def victim(uuid: str) -> dict | None:
    """The process the kernel's OOM killer took in the agent's group, from the
    kernel log (``/dev/kmsg``, root only); None when it cannot be read."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    found = None
    try:
        while True:
            try:
                rec = os.read(fd, 8192).decode(errors="replace")
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while read: go on
                    continue
                break
            m = _KILL.search(rec)
            if m and m.group("cg").rstrip("/").endswith("/" + uuid):
                found = {"task": m.group("task"), "pid": int(m.group("pid"))}
    finally:
        os.close(fd)
    return found
