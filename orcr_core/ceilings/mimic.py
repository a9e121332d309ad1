"""A temp directory tree that answers like the cgroup v2 kernel (tests only).

cgroup v2 cannot be exercised for real on this project's machines: their
unified hierarchy carries no memory, pids or cpu controller. The v2 backend is
tested against this mimic instead. It is plain files (what the kernel would
show, so ``cat`` works on it) behind :class:`MimicFs`, which applies the
kernel's rules on every write, no stricter and no looser. The rules marked
"seen" were checked against this machine's real unified hierarchy (with its
one controller, hugetlb); the others follow Documentation/admin-guide/cgroup-v2.rst:

* a group's controller files (``memory.max``, ``pids.max``, ``cpu.weight``...)
  exist only while the parent enables that controller in its
  ``cgroup.subtree_control``; writing a file that is not there is ``ENOENT`` (seen);
* ``+name`` needs ``name`` in the group's own ``cgroup.controllers`` (else
  ``ENOENT``, seen); a token without ``+``/``-`` is ``EINVAL`` (seen);
* no internal process: a non-root group with processes cannot enable a
  controller for its children, and a group that enables one cannot take a
  process (``EBUSY`` both, seen); ``-name`` while a child enables it is ``EBUSY``;
* ``cgroup.procs``: a pid that does not exist is ``ESRCH``, garbage ``EINVAL``
  (seen); dead processes are not listed;
* ``rmdir`` of a group with a child or a live process is ``EBUSY`` (seen);
* ``memory.max``/``memory.high``: ``max`` or bytes with an optional K/M/G/T
  suffix, rounded down to the page; ``pids.max``: ``max`` or a count;
  ``cpu.weight``: 1..10000 (``ERANGE`` outside); a read-only file is ``EACCES``
  to open for writing, ``EINVAL`` to write for root, who may open it (seen);
  ``cgroup.kill``: ``1`` kills every process in the subtree.

Where it is looser than the kernel, knowingly: it does not see forks. A process
is in the group its pid was written to (a launch step's ``exec`` keeps the pid,
so an agent's own process is placed right), but its children are not listed, so
a child that outlives its parent does not keep a group busy as the kernel would.
The suite's cgroup v1 leg shows that behaviour on the real kernel instead.

The tree's marker file (:data:`~orcr_core.ceilings.cgroupfs.MIMIC_MARKER`)
records the group new processes start in and the groups delegated to this
user. What the kernel does on its own (a kill at ``memory.max``, a refused
fork) is done by the tests through :meth:`MimicFs.oom_kill` and friends.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
from pathlib import Path

from orcr_core.ceilings.cgroupfs import MIMIC_MARKER, KernelFs, keyed

PAGE = 4096
TMP_PREFIX = ".orcr-mkdir-"  # a group being made (see MimicFs.mkdir)
CORE = {
    "cgroup.controllers": "",
    "cgroup.subtree_control": "",
    "cgroup.procs": "",
    "cgroup.threads": "",
    "cgroup.events": "populated 0\nfrozen 0\n",
    "cgroup.type": "domain\n",
    "cgroup.freeze": "0\n",
    "cgroup.kill": "",
    "cgroup.max.depth": "max\n",
    "cgroup.max.descendants": "max\n",
    "cgroup.stat": "nr_descendants 0\nnr_dying_descendants 0\n",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
    "cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    "io.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
}
EVENTS = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
FILES = {
    "memory": {
        "memory.current": "0\n",
        "memory.peak": "0\n",
        "memory.min": "0\n",
        "memory.low": "0\n",
        "memory.high": "max\n",
        "memory.max": "max\n",
        "memory.events": EVENTS,
        "memory.events.local": EVENTS,
        "memory.stat": "anon 0\nfile 0\n",
        "memory.oom.group": "0\n",
        "memory.swap.current": "0\n",
        "memory.swap.max": "max\n",
    },
    "pids": {
        "pids.current": "0\n",
        "pids.peak": "0\n",
        "pids.max": "max\n",
        "pids.events": "max 0\n",
    },
    "cpu": {"cpu.weight": "100\n", "cpu.weight.nice": "0\n", "cpu.max": "max 100000\n"},
    # the one controller this machine's real v2 hierarchy has: the fidelity test's
    "hugetlb": {"hugetlb.2MB.max": "max\n", "hugetlb.2MB.current": "0\n"},
}
WRITABLE = {"memory.max", "memory.high", "memory.low", "memory.min", "memory.swap.max",
            "memory.oom.group", "pids.max", "cpu.weight", "cpu.max", "cgroup.procs", "hugetlb.2MB.max",
            "cgroup.subtree_control", "cgroup.kill", "cgroup.freeze", "cgroup.threads",
            "cgroup.max.depth", "cgroup.max.descendants"}  # fmt: skip
_SUFFIX = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50, "e": 2**60}


def _err(code: int, path: Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _memparse(text: str, path: Path) -> str:
    text = text.strip()
    if text == "max":
        return "max"
    num, mult = (
        (text[:-1], _SUFFIX[text[-1].lower()]) if text[-1:].lower() in _SUFFIX else (text, 1)
    )
    if not num.isdigit():
        raise _err(errno.EINVAL, path)
    return str(int(num) * mult // PAGE * PAGE)


class MimicFs(KernelFs):
    """The kernel's v2 rules over a plain tree (see the module's docstring)."""

    mimic = True

    @classmethod
    def make(
        cls,
        root: str | os.PathLike,
        start: str,
        controllers: tuple[str, ...] = ("memory", "pids", "cpu"),
        delegated: bool = True,
        unit: str | None = None,
    ) -> MimicFs:
        """A hierarchy whose root offers ``controllers``, enabled down to the unit's
        group ``unit`` (default ``start``) as a service manager does; ``start`` is
        where the service's process starts (``unit/orcr-server`` for a unit with
        ``DelegateSubgroup=orcr-server``). ``delegated``: the unit's group is this
        user's (``Delegate=yes``)."""
        unit = unit or start
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        for name, text in CORE.items():
            (root / name).write_text(text)
        (root / "cgroup.controllers").write_text(" ".join(controllers) + "\n")
        (root / "memory.stat").write_text("anon 0\nfile 0\n")
        marker = {"start": start, "delegated": [unit] if delegated else []}
        (root / MIMIC_MARKER).write_text(json.dumps(marker))
        fs = cls(root)
        group = ""
        for part in [p for p in start.split("/") if p]:
            if len(group) < len(unit.rstrip("/")):  # above the unit: the manager enables
                fs.write(
                    group or "/", "cgroup.subtree_control", " ".join(f"+{c}" for c in controllers)
                )
            group += "/" + part
            fs.mkdir(group)
        return fs

    def _groups(self):
        """(directory, its files) of every group, none being made."""
        for dirpath, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if not d.startswith(TMP_PREFIX)]
            yield dirpath, files

    def _marker(self) -> dict:
        return json.loads((self.root / MIMIC_MARKER).read_text())

    def own(self) -> str:
        me = str(os.getpid())
        for dirpath, files in self._groups():
            if "cgroup.procs" in files and me in self._procs(Path(dirpath)):
                return "/" + str(Path(dirpath).relative_to(self.root)).strip(".")
        start = self._marker()["start"]
        self._place(int(me), start)  # a new process starts where the service manager put it
        return start

    def writable(self, group: str) -> bool:
        g = "/" + group.strip("/")
        return any(g == d or g.startswith(d.rstrip("/") + "/") for d in self._marker()["delegated"])

    # -- the kernel's side -------------------------------------------------

    def _procs(self, path: Path) -> list[str]:
        try:
            pids = (path / "cgroup.procs").read_text().split()
        except FileNotFoundError:
            return []
        live = [p for p in pids if p.isdigit() and _alive(int(p))]
        if live != pids:
            (path / "cgroup.procs").write_text("".join(f"{p}\n" for p in live))
        return live

    def _place(self, pid: int, group: str) -> None:
        for dirpath, files in self._groups():
            if "cgroup.procs" in files:
                p = Path(dirpath)
                if str(pid) in self._procs(p):
                    left = [x for x in self._procs(p) if x != str(pid)]
                    (p / "cgroup.procs").write_text("".join(f"{x}\n" for x in left))
        target = self.path(group, "cgroup.procs")
        target.write_text(target.read_text() + f"{pid}\n")

    def _enabled(self, group: str) -> list[str]:
        return self.path(group, "cgroup.subtree_control").read_text().split()

    def mkdir(self, group: str) -> None:
        path = self.path(group)
        if path.exists():
            raise _err(errno.EEXIST, path)
        if not path.parent.is_dir():
            raise _err(errno.ENOENT, path)
        # made aside, then renamed in: the kernel's mkdir shows a group whole, never
        # a directory still without its files (another process may be looking)
        tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.getpid()}"
        tmp.mkdir()
        parent = "/" + str(path.parent.relative_to(self.root)).strip(".")
        enabled = self._enabled(parent)
        for name, text in CORE.items():
            (tmp / name).write_text(text)
        (tmp / "cgroup.controllers").write_text(" ".join(enabled) + ("\n" if enabled else ""))
        for c in enabled:
            for name, text in FILES[c].items():
                (tmp / name).write_text(text)
        try:
            os.rename(tmp, path)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise _err(errno.EEXIST, path) from None

    def children(self, group: str) -> list[str]:
        return [c for c in super().children(group) if not c.startswith(TMP_PREFIX)]

    def rmdir(self, group: str) -> None:
        path = self.path(group)
        if not path.is_dir() or path == self.root:
            raise _err(errno.ENOENT if not path.is_dir() else errno.EBUSY, path)
        if any(e.is_dir() for e in path.iterdir()) or self._procs(path):
            raise _err(errno.EBUSY, path)
        shutil.rmtree(path)

    def read(self, group: str, file: str) -> str:
        if file == "cgroup.procs":
            path = self.path(group)
            if not (path / file).exists():
                raise _err(errno.ENOENT, path / file)
            return "".join(f"{p}\n" for p in self._procs(path))
        return super().read(group, file)

    def write(self, group: str, file: str, text: str) -> None:
        path = self.path(group, file)
        if not path.exists():
            raise _err(errno.ENOENT, path)
        if file not in WRITABLE:  # root may open it, the kernel then refuses the write
            raise _err(errno.EINVAL if os.geteuid() == 0 else errno.EACCES, path)
        is_root = self.path(group) == self.root
        if file == "cgroup.subtree_control":
            return self._subtree(group, text, is_root)
        if file == "cgroup.procs":
            if not text.strip().isdigit():
                raise _err(errno.EINVAL, path)
            if not _alive(int(text)):
                raise _err(errno.ESRCH, path)
            if not is_root and self._enabled(group):
                raise _err(errno.EBUSY, path)
            return self._place(int(text), group)
        if file == "cgroup.kill":
            if text.strip() != "1":
                raise _err(errno.EINVAL, path)
            for dirpath, _dirs, _files in os.walk(self.path(group)):
                for pid in self._procs(Path(dirpath)):
                    os.kill(int(pid), signal.SIGKILL)
            return None
        value = text.strip()
        if file in ("memory.max", "memory.high", "memory.low", "memory.min", "memory.swap.max"):
            value = _memparse(value, path)
        elif file == "pids.max":
            if value != "max" and not value.isdigit():
                raise _err(errno.EINVAL, path)
        elif file == "cpu.weight":
            if not value.isdigit():
                raise _err(errno.EINVAL, path)
            if not 1 <= int(value) <= 10_000:
                raise _err(errno.ERANGE, path)
        path.write_text(value + "\n")
        return None

    def _subtree(self, group: str, text: str, is_root: bool) -> None:
        path = self.path(group, "cgroup.subtree_control")
        own = self.read(group, "cgroup.controllers").split()
        enabled = self._enabled(group)
        kids = self.children(group)
        for token in text.split():
            sign, name = token[:1], token[1:]
            if sign not in "+-" or not sign or not name:
                raise _err(errno.EINVAL, path)
            if name not in own:
                raise _err(errno.ENOENT, path)
            if (
                sign == "+"
                and name not in enabled
                and not is_root
                and self._procs(self.path(group))
            ):
                raise _err(errno.EBUSY, path)
            if sign == "-" and any(name in self._enabled(f"{group}/{k}") for k in kids):
                raise _err(errno.EBUSY, path)
        for token in text.split():
            sign, name = token[0], token[1:]
            if sign == "+" and name not in enabled:
                enabled.append(name)
            elif sign == "-" and name in enabled:
                enabled.remove(name)
        order = [c for c in own if c in enabled]
        path.write_text(" ".join(order) + ("\n" if order else ""))
        for k in kids:
            kid = self.path(f"{group}/{k}")
            (kid / "cgroup.controllers").write_text(" ".join(order) + ("\n" if order else ""))
            for c, files in FILES.items():
                for name, default in files.items():
                    if c in order and not (kid / name).exists():
                        (kid / name).write_text(default)
                    elif c not in order and (kid / name).exists():
                        (kid / name).unlink()

    # -- what the kernel does by itself (tests drive it) -----------------------

    def charge(self, group: str, current: int, pids: int | None = None) -> None:
        """Memory (and tasks) in use in ``group``: the peak follows."""
        self.path(group, "memory.current").write_text(f"{current}\n")
        peak = max(current, int(self.read(group, "memory.peak")))
        self.path(group, "memory.peak").write_text(f"{peak}\n")
        if pids is not None:
            self.path(group, "pids.current").write_text(f"{pids}\n")

    def oom_kill(self, group: str) -> int | None:
        """The kernel at ``group``'s ``memory.max``: counts a kill in its
        ``memory.events`` and its ancestors' (hierarchical), the peak at the
        ceiling, and SIGKILLs one process of it (returned)."""
        limit = self.read(group, "memory.max").strip()
        if limit != "max":
            self.charge(group, int(limit))
        g = group
        while True:
            if self.exists(g, "memory.events"):
                self._bump(g, "memory.events", ("max", "oom", "oom_kill"))
            if g.strip("/") == "":
                break
            g = "/" + "/".join(g.strip("/").split("/")[:-1])
        self._bump(group, "memory.events.local", ("max", "oom", "oom_kill"))
        victims = self._procs(self.path(group))
        if not victims:
            return None
        os.kill(int(victims[0]), signal.SIGKILL)
        return int(victims[0])

    def refuse_fork(self, group: str) -> None:
        """The kernel refusing a fork at ``group``'s ``pids.max``."""
        self._bump(group, "pids.events", ("max",))

    def _bump(self, group: str, file: str, keys: tuple[str, ...]) -> None:
        text = self.read(group, file)
        lines = []
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            lines.append(f"{k} {int(v) + 1}" if k in keys else line)
        self.path(group, file).write_text("\n".join(lines) + "\n")

    def check(self) -> list[str]:
        """What the kernel would never show: a process in a non-root group that
        enables controllers for its children (the no-internal-process rule)."""
        bad = []
        for dirpath, files in self._groups():
            p = Path(dirpath)
            if p != self.root and "cgroup.subtree_control" in files:
                if (p / "cgroup.subtree_control").read_text().split() and self._procs(p):
                    bad.append(f"{p.relative_to(self.root)}: processes in a group with controllers")
        return bad


__all__ = ["MimicFs", "keyed"]
