"""A test's processes, tracked by a cgroup v1 freezer group instead of a machine-wide walk.

At an ``orcr_home``'s setup the test process (the pytest worker) moves itself into a
fresh freezer cgroup, ``<its freezer cgroup>/orcr-tests/<pid>-<n>``; every process the
test then starts, by any route (the server, a CLI's autostarted server, the tmux server
it double-forks and setsid's, panes, agents that orcr's ceilings move into memory, pids
or cpu cgroups: other hierarchies, which leave the freezer one alone), inherits it. A
process can leave a cgroup only by someone writing it into another one of the same
hierarchy, and nothing in orcr touches ``freezer`` (its ceilings use memory, pids and
cpu). So at teardown the group's ``cgroup.procs`` (and its children's, for a pytest run
inside the test) is what the test left running: :meth:`OrcrHome.reap
<orcr_testing.home.OrcrHome.reap>` reads a handful of pids instead of every process's
environment on the machine. The group is never frozen: freezer is used only because
nothing else uses it, as a process tracker.

:func:`enter` returns ``None`` where the hierarchy is missing or not writable (not root,
a machine with only cgroup v2, a container with ``/sys/fs/cgroup`` read-only): the
caller then falls back to the ``/proc`` walk (:func:`orcr_testing.home.processes_under`).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

#: the freezer hierarchy's mount point (cgroup v1)
ROOT = Path("/sys/fs/cgroup/freezer")
#: the folder under the worker's own freezer cgroup that holds the tests' groups
PARENT = "orcr-tests"

_count = itertools.count(1)
#: the freezer cgroup this process made its first group under (what :func:`sweep` cleans)
_base: Path | None = None


def current(pid: int | str = "self") -> Path | None:
    """The freezer cgroup folder ``pid`` is in, or None (no freezer hierarchy)."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "freezer" in controllers.split(","):
                    return ROOT / path.lstrip("/")
    except OSError:
        pass
    return None


class TestGroup:
    """The freezer cgroup one test's processes are in (see the module docstring)."""

    __test__ = False  # a class named Test*: not a test class for pytest

    def __init__(self, path: Path, before: Path):
        self.path = path  # this test's group
        self.before = before  # where the worker was, and goes back to

    def members(self) -> list[int]:
        """The pids in the group and in the groups under it, but this process."""
        me, out = os.getpid(), []
        for folder, _, _ in os.walk(self.path):
            try:
                with open(os.path.join(folder, "cgroup.procs")) as fh:
                    out += [int(p) for p in fh.read().split() if int(p) != me]
            except OSError:
                continue  # removed under us
        return out

    def leave(self) -> None:
        """Move the worker back where it was; remove the group if nothing is left in it
        (a process it still holds, a session's PostgreSQL cluster started during the
        test, keeps it: :func:`sweep` removes it at the session's end once empty)."""
        try:
            (self.before / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            pass
        remove_empty(self.path)


def enter() -> TestGroup | None:
    """Move this process into a fresh freezer group; None where that cannot be done."""
    before = current()
    if before is None or not (before / "cgroup.procs").exists():
        return None
    global _base
    _base = _base or before
    path = before / PARENT / f"{os.getpid()}-{next(_count)}"
    try:
        path.mkdir(parents=True)
        (path / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        remove_empty(path)
        return None
    return TestGroup(path, before)


def remove_empty(path: Path) -> None:
    """rmdir ``path`` and the groups under it, deepest first; a group with a process in
    it (EBUSY) stays, and so do the ones above it."""
    for folder, _, _ in os.walk(path, topdown=False):
        try:
            os.rmdir(folder)
        except OSError:
            continue


def sweep() -> None:
    """At a session's end: remove the empty groups this process made and those of
    processes that are gone (another worker's live groups are left alone)."""
    base = _base or current()
    if base is None or not (base / PARENT).is_dir():
        return
    for group in (base / PARENT).iterdir():
        owner = group.name.split("-", 1)[0]
        if owner == str(os.getpid()) or not Path(f"/proc/{owner}").exists():
            remove_empty(group)
    try:
        (base / PARENT).rmdir()
    except OSError:
        pass
