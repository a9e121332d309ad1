"""No stray processes: an ended agent's processes end with it (issue 10, item 8).

Closing a pane only hangs up its process group: a child that left it
(``setsid``, a daemon) or ignores SIGHUP (``nohup``) outlives the agent. So
orcr tracks what an agent started:

* while the agent runs, :func:`observe` (called by the monitor with each pane
  snapshot) records the pane's root process and every descendant psutil sees as
  ``(pid, create_time)``, persisted in ``agents/<uuid>/procs.json`` so a
  server restart keeps them; a child that later leaves the tree (its parent
  exits, it is re-parented to init) stays recorded;
* when the agent ends, :func:`collect` takes the pane's process tree as psutil
  sees it at that moment plus everything recorded, before the pane is closed;
  after the close :func:`stop` sends TERM to each survivor, waits
  ``timings.stop_grace`` and sends KILL to what is left.

A process is signalled only if a process with its pid still has the start time
recorded for it (:func:`start_of`), checked before every signal: a pid the
kernel has since given to another process is never signalled.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from orcr_core.contracts import DriverError, PaneProcesses, PaneRef
from orcr_core.store import events
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.procs")

OBSERVE_EVERY = 1.0  # seconds between process-tree observations
_lock = threading.Lock()
_seen: dict[str, dict[int, float]] = {}  # agent uuid -> {pid: create_time}
_roots: dict[str, tuple[int, float]] = {}  # agent uuid -> the pane's root process
_last_observe = 0.0

Proc = tuple[int, float]  # (pid, create_time)


def _file(server: ServerContext, uuid: str) -> Path:
    return Path(server.agents_dir) / uuid / "procs.json"


def recorded(server: ServerContext, uuid: str) -> dict[int, float]:
    """The processes recorded for an agent (memory, else its ``procs.json``)."""
    with _lock:
        if uuid in _seen:
            return dict(_seen[uuid])
    try:
        data = json.loads(_file(server, uuid).read_text())
    except (OSError, ValueError):
        return {}
    procs = {int(p): float(t) for p, t in data.get("procs", [])}
    with _lock:
        _seen.setdefault(uuid, procs)
        if data.get("root"):
            _roots.setdefault(uuid, (int(data["root"][0]), float(data["root"][1])))
    return procs


def _save(server: ServerContext, uuid: str) -> None:
    path = _file(server, uuid)
    with _lock:
        data = {"root": _roots.get(uuid), "procs": sorted(_seen.get(uuid, {}).items())}
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError as exc:  # the agent's directory is gone: nothing to keep it in
        log.debug("procs.json for %s not written: %s", uuid, exc)


_PROC_STAT = os.path.exists(f"/proc/{os.getpid()}/stat")
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def start_of(pid: int) -> float | None:
    """When ``pid`` started, as a value that names it among every process this boot.

    On Linux: seconds from boot (``/proc/<pid>/stat``'s start ticks). psutil's
    ``create_time`` adds the kernel's boot time (``btime``), which is the wall clock
    less the uptime and moves when the wall clock is stepped or slewed (NTP, a
    resume from sleep): a process would seem to have started a second or more later
    than it did, and a pane's own process taken for another one (the agent ``lost``;
    seen in CI and the real_cli tier). Elsewhere: psutil's ``create_time``."""
    if _PROC_STAT:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            return int(stat[stat.rindex(b")") + 2 :].split()[19]) / _CLK_TCK  # field 22
        except (OSError, ValueError, IndexError):
            return None
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, ValueError):
        return None


def io_counts(pid: int) -> tuple[int, int] | None:
    """The bytes process ``pid`` has read and written so far (``rchar``, ``wchar`` of
    ``/proc/<pid>/io``, a terminal's included); None when it is gone or unreadable."""
    counts = {}
    try:
        with open(f"/proc/{pid}/io", "rb") as fh:
            for line in fh:
                key, _, value = line.partition(b":")
                if key in (b"rchar", b"wchar"):
                    counts[key] = int(value)
    except (OSError, ValueError):
        return None
    return (counts[b"rchar"], counts[b"wchar"]) if len(counts) == 2 else None


def _children_map() -> Kids:
    """Every process's children: read when asked where Linux keeps each thread's
    children list (:class:`_ChildrenLists`), else from one pass over the process table.

    The table pass reads each ``/proc/<pid>/stat`` once and takes its ppid: psutil's
    ``process_iter`` reads each twice and builds a Process for each, which was most
    of an agent's kill and a good part of the monitor's second (bench/lifetime.py).
    Even so it reads every process on the machine (~10 ms at 1,000) to walk a tree of
    a few.
    """
    if _TASK_CHILDREN:
        return _ChildrenLists()
    if _PROC_STAT:
        return _proc_children()
    kids: dict[int, list[int]] = {}
    for p in psutil.process_iter(["ppid"]):
        ppid = p.info.get("ppid")
        if ppid is not None:
            kids.setdefault(ppid, []).append(p.pid)
    return kids


#: Linux's children list of each thread (``CONFIG_PROC_CHILDREN``)
_TASK_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


class _ChildrenLists:
    """A process's children read when asked, from ``/proc/<pid>/task/*/children``
    (every thread's: a child is listed under the thread that forked it): a walk from an
    agent's root reads its tree only. Like the table pass, a snapshot of a moving
    tree: what forks after its parent was read is found by the next walk."""

    def get(self, pid: int, default: Sequence[int] = ()) -> Sequence[int]:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return default
        found: list[int] = []
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    found.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError):
                continue  # the thread ended meanwhile
        return found or default


#: each process's children, as a dict of them reads: ``kids.get(pid, ())``
Kids = dict[int, list[int]] | _ChildrenLists


def _proc_children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 4096)
            finally:
                os.close(fd)
            # pid (comm) state ppid ...: comm may hold spaces and parentheses
            ppid = int(stat[stat.rindex(b")") + 2 :].split(None, 2)[1])
        except (OSError, ValueError, IndexError):  # gone since listed, or unreadable
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def has_children(pid: int) -> bool:
    """Whether ``pid`` has a child now; True when this cannot be told cheaply (no
    children lists: a whole table pass is not worth it)."""
    if not _TASK_CHILDREN:
        return True
    return bool(_ChildrenLists().get(pid))


def children_map() -> Kids:
    """Every process's children (none when the process table cannot be read)."""
    try:
        return _children_map()
    except psutil.Error:
        return {}


def root(agent: Agent) -> Proc | None:
    """The agent's pane process as last observed, else as its row records it
    (``pid:<pid>@<start>``, tmux), else None (not seen yet)."""
    with _lock:
        if agent.uuid in _roots:
            return _roots[agent.uuid]
    ident = agent.pane_process or ""
    if not ident.startswith("pid:"):
        return None
    try:
        pid, started = ident[4:].split("@")
        ctime = start_of(int(pid))
    except ValueError:
        return None
    if ctime is None or stamp_like(int(pid), started, ctime) != started:
        return None
    return (int(pid), ctime)


def stamp(pid: int, start: float | None = None) -> str | None:
    """``pid``'s start as a row records it (``pid:<pid>@<stamp>``): ``b<seconds from
    boot>`` where /proc tells them (:func:`start_of`; ``start`` when already read),
    else the wall-clock start."""
    t = start_of(pid) if start is None else start
    if t is None:
        return None
    return f"b{t:.2f}" if _PROC_STAT else f"{t:.2f}"


def stamp_like(pid: int, like: str, start: float | None = None) -> str | None:
    """``pid``'s stamp in the form of ``like``: a row written before stamps counted
    from boot holds psutil's wall-clock start (two decimals)."""
    if like.startswith("b"):
        return stamp(pid, start)
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except (psutil.Error, ValueError):
        return None


def tree(root: Proc, kids: Kids) -> dict[int, float]:
    """``root`` and its descendants, if ``root`` is still the recorded process."""
    return _tree(root, kids)


def _tree(root: Proc, kids: Kids) -> dict[int, float]:
    """``root`` and its descendants, if ``root`` is still the recorded process."""
    pid, ctime = root
    if start_of(pid) != ctime:
        return {}
    found: dict[int, float] = {pid: ctime}
    todo = list(kids.get(pid, ()))
    while todo:
        child = todo.pop()
        if child in found:
            continue
        t = start_of(child)
        if t is None or t < ctime:  # gone, or older than its supposed ancestor
            continue
        found[child] = t
        todo.extend(kids.get(child, ()))
    return found


def _root_of(server: ServerContext, agent: Agent, pid: int | None) -> Proc | None:
    """The pane's root process: ``pid`` from the snapshot, else asked of the driver."""
    if pid is None:
        ask = server.driver.pane_pid if isinstance(server.driver, PaneProcesses) else None
        pane = _ref(agent)
        if ask is None or pane is None:
            return None
        try:
            pid = ask(pane)
        except DriverError:
            return None
    if not pid:
        return None
    ctime = start_of(pid)
    return (pid, ctime) if ctime is not None else None


def _ref(agent: Agent) -> PaneRef | None:
    from orcr_core.agents.launch import pane_of

    return pane_of(agent)


def observe(server: ServerContext, seen: list) -> None:
    """Record each running agent's process tree; ``seen`` holds ``(agent, PaneInfo)``."""
    global _last_observe
    now = time.monotonic()
    if not seen or now - _last_observe < OBSERVE_EVERY:
        return
    _last_observe = now
    try:
        kids = _children_map()
    except psutil.Error as exc:
        log.debug("process table unreadable: %s", exc)
        return
    for agent, pane in seen:
        recorded(server, agent.uuid)  # loads procs.json after a restart
        with _lock:
            root = _roots.get(agent.uuid)
        pid = getattr(pane, "pid", None)
        if root is None or (pid is not None and pid != root[0]):
            root = _root_of(server, agent, pid)
            if root is None:
                continue
        tree = _tree(root, kids)
        with _lock:
            known = _seen.setdefault(agent.uuid, {})
            new = {p: t for p, t in tree.items() if known.get(p) != t}
            changed = bool(new) or _roots.get(agent.uuid) != root
            known.update(new)
            _roots[agent.uuid] = root
        if changed:
            _save(server, agent.uuid)


def collect(
    server: ServerContext, agent: Agent, pane: PaneRef | None, whole: bool = True
) -> dict[int, float]:
    """Everything the agent started, at this moment: the pane's tree plus the
    recorded processes. Call before the pane is closed (closing it re-parents
    its children, and the tree can no longer be walked).

    ``whole=False``: the pane's tree alone, for a pane that is not the agent's
    current one (a late pane of a launch a resume replaced): the recorded
    processes are the running launch's, and must live on."""
    procs = recorded(server, agent.uuid) if whole else {}
    roots = []
    with _lock:
        if whole and agent.uuid in _roots:
            roots.append(_roots[agent.uuid])
    if pane is not None and isinstance(server.driver, PaneProcesses):
        try:
            pid = server.driver.pane_pid(pane)
        except DriverError:
            pid = None
        if pid:
            ctime = start_of(pid)
            if ctime is not None:
                roots.append((pid, ctime))
    if roots:
        try:
            kids = _children_map()
        except psutil.Error:
            kids = {}
        for root in roots:
            procs.update(_tree(root, kids))
    procs.pop(os.getpid(), None)  # never the server itself
    return procs


def _same(pid: int, ctime: float) -> psutil.Process | None:
    """The process ``pid`` if it is still the one started at ``ctime``."""
    try:
        p = psutil.Process(pid)
        if start_of(pid) != ctime or p.status() == psutil.STATUS_ZOMBIE:
            return None
        return p
    except (psutil.Error, ValueError):
        return None


def _signal(procs: dict[int, float], sig: int) -> list[int]:
    sent = []
    for pid, ctime in procs.items():
        p = _same(pid, ctime)  # identity checked right before the signal
        if p is None:
            continue
        try:
            p.send_signal(sig)  # psutil checks the start time again
            sent.append(pid)
        except psutil.Error:
            pass
    return sent


def stop(server: ServerContext, agent: Agent, procs: dict[int, float], wait: bool = False) -> None:
    """TERM each process still alive, KILL what outlives ``timings.stop_grace``.

    The grace wait runs in a background thread (``wait=True`` runs it here);
    an ``agent.processes_stopped`` event reports what was signalled.
    """
    forget(agent.uuid)
    procs = {p: t for p, t in procs.items() if p != os.getpid()}
    termed = _signal(procs, signal.SIGTERM)
    if not termed:
        return
    grace = server.config.duration("timings.stop_grace")
    uuid, path = agent.uuid, agent.path

    def finish() -> None:
        deadline = time.monotonic() + grace
        left = {p: procs[p] for p in termed}
        while left and time.monotonic() < deadline:
            left = {p: t for p, t in left.items() if _same(p, t) is not None}
            if left:
                time.sleep(0.05)
        killed = _signal(left, signal.SIGKILL)
        try:
            with db.atomic("IMMEDIATE"):
                events.emit(
                    "agent.processes_stopped", uuid, path=path, terminated=termed, killed=killed
                )
        except Exception:  # the store closed under a stopping server
            log.exception("agent %s: processes_stopped not recorded", path)

    if wait:
        finish()
    else:
        threading.Thread(target=finish, name=f"orcr-stop-{uuid[:8]}", daemon=True).start()


def forget(uuid: str) -> None:
    with _lock:
        _seen.pop(uuid, None)
        _roots.pop(uuid, None)
