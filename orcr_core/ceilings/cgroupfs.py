"""The cgroup v2 file protocol, as the v2 and systemd backends talk to it.

:class:`KernelFs` is the real thing: plain system calls on the unified
hierarchy. Files are opened for writing without ``O_CREAT`` (the kernel makes
every interface file itself; a file that is not there is ``ENOENT``, as it is
for a controller not yet enabled in the parent's ``cgroup.subtree_control``).

:func:`orcr_core.ceilings.hierarchy.open_root` picks the hierarchy.
"""

from __future__ import annotations

import os
from pathlib import Path

#: a file no real cgroupfs can contain: its presence marks a mimic tree
MIMIC_MARKER = ".orcr-mimic.json"


class KernelFs:
    """The unified hierarchy at ``root``; groups are ``/a/b`` paths below it."""

    mimic = False

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def path(self, group: str, file: str | None = None) -> Path:
        p = self.root / group.strip("/") if group.strip("/") else self.root
        return p / file if file else p

    def own(self) -> str:
        """This process's group (the ``0::`` line of ``/proc/self/cgroup``)."""
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip() or "/"
        return "/"

    def exists(self, group: str, file: str | None = None) -> bool:
        return self.path(group, file).exists()

    def mkdir(self, group: str) -> None:
        os.mkdir(self.path(group))

    def rmdir(self, group: str) -> None:
        os.rmdir(self.path(group))

    def read(self, group: str, file: str) -> str:
        with open(self.path(group, file)) as f:
            return f.read()

    def write(self, group: str, file: str, text: str) -> None:
        fd = os.open(self.path(group, file), os.O_WRONLY)  # never O_CREAT
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def children(self, group: str) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.path(group)) if e.is_dir())
        except FileNotFoundError:
            return []

    def writable(self, group: str) -> bool:
        """Whether this user may manage ``group``'s subtree: what ``Delegate=yes``
        gives a unit (the directory, ``cgroup.procs`` and ``cgroup.subtree_control``)."""
        return all(
            os.access(self.path(group, f), os.W_OK)
            for f in (None, "cgroup.procs", "cgroup.subtree_control")
        )


def keyed(text: str | None, key: str) -> int:
    """``key``'s count in a flat keyed file (``memory.events``, ``pids.events``)."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return 0
    return 0
