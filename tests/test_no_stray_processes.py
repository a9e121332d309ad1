"""No stray processes (issue 10, item 8): when an agent ends, every process it
started ends too — the pane's tree at that moment, children that left the
process group (``setsid``) or ignore SIGHUP (``nohup``), and children recorded
while the agent ran that have since left the tree; never a reused pid.

The end-to-end test runs on real tmux and on the herdr emulator (``live``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from types import SimpleNamespace

import psutil

from orcr_core.agents import procs
from orcr_core.kit.testing import until

# A "dev server" agent: a nohup sleeper, a setsid grandchild, and a setsid
# grandchild whose parent exits once told to (file ``go``): it leaves the tree.
SCRIPT = """
nohup sleep 1000 >/dev/null 2>&1 &
echo $! > nohup.pid
setsid sleep 1001 &
echo $! > setsid.pid
sh -c 'setsid sleep 1002 & echo $! > left.pid; while [ ! -e go ]; do sleep 0.05; done' &
echo started
wait
"""


def _alive(pid: int, ctime: float) -> bool:
    try:
        p = psutil.Process(pid)
        return p.create_time() == ctime and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _pid(path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cleanup(found: dict[int, float]) -> None:
    for pid, ctime in found.items():
        if _alive(pid, ctime):
            os.kill(pid, signal.SIGKILL)


def _run_script(live, tmp, path: str, script: str):
    """A server, and a ``command`` agent at ``path`` running ``sh -c script`` in a
    fresh directory (returned), where the script leaves its pid files."""
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nstop_grace = "2s"\n')
    live.start_server()
    work = tmp / "w"
    work.mkdir()
    live.run("agent", "run", "-p", "command", "--path", path, "--cwd", str(work),
             "--", "sh", "-c", script, check=True)  # fmt: skip
    return work


def test_agent_kill_ends_setsid_nohup_and_departed_children(live, short_tmp):
    work = _run_script(live, short_tmp, "d/dev", SCRIPT)
    found: dict[int, float] = {}
    try:
        for name in ("nohup", "setsid", "left"):
            pid = until(lambda n=name: _pid(work / f"{n}.pid"), 30, what=f"{name}.pid")
            found[pid] = psutil.Process(pid).create_time()
        left = _pid(work / "left.pid")
        parent = psutil.Process(left).ppid()  # the sh that waits for ``go``
        uuid = live.get("d/dev")["uuid"]
        record = live.path / "agents" / uuid / "procs.json"

        def recorded() -> set[int]:
            try:
                return {p for p, _ in json.loads(record.read_text())["procs"]}
            except (OSError, ValueError):
                return set()

        # the monitor recorded the whole tree while the agent ran ...
        until(lambda: set(found) <= recorded(), 30, what="the tree to be recorded")
        # ... so a grandchild that then leaves it (its parent exits) is still known
        (work / "go").touch()
        until(lambda: psutil.Process(left).ppid() != parent, 30, what="the grandchild to leave")
        live.run("agent", "kill", "d/dev", check=True)
        until(
            lambda: not any(_alive(p, t) for p, t in found.items()),
            30,
            what="every process the agent started to end",
        )
        stopped = until(
            lambda: [e for e in live.events(uuid) if e["kind"] == "agent.processes_stopped"],
            30,
            what="agent.processes_stopped",
        )
        # the pane's close may end the nohup sleeper itself (herdr kills the group);
        # the processes outside the group can only have been ended by orcr
        outside = {_pid(work / "setsid.pid"), left}
        assert outside <= set(stopped[0]["data"]["terminated"])
    finally:
        _cleanup(found)


class _Config:
    def duration(self, key: str) -> float:
        assert key == "timings.stop_grace"
        return 5.0


def _fake_server(tmp, pane_pid=None):
    driver = SimpleNamespace(pane_pid=lambda pane: pane_pid)
    return SimpleNamespace(agents_dir=tmp, config=_Config(), driver=driver)


def _agent(uuid="u-procs"):
    return SimpleNamespace(uuid=uuid, path="t/p")


def test_a_reused_pid_is_never_signalled(tmp_path):
    """A recorded pid whose process now has another start time is someone else's."""
    other = subprocess.Popen(["sleep", "1000"])
    try:
        ctime = procs.start_of(other.pid)
        server = _fake_server(tmp_path)
        procs.stop(server, _agent(), {other.pid: ctime - 5.0}, wait=True)
        assert other.poll() is None, "a process with a different start time was signalled"
        # the same process under its real start time is the agent's: it ends
        procs.stop(server, _agent(), {other.pid: ctime}, wait=True)
        assert other.wait(10) == -signal.SIGTERM
    finally:
        if other.poll() is None:
            other.kill()
        other.wait()


def test_collect_walks_the_pane_tree_at_the_moment_of_the_end(tmp_path):
    """Nothing recorded yet (the agent ends before the monitor looked): the pane's
    tree as psutil sees it now is collected, setsid and nohup children included."""
    root = subprocess.Popen(
        ["sh", "-c", "setsid sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 & echo x; wait"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        root.stdout.readline()  # both children started
        kids = until(lambda: (lambda c: c if len(c) == 2 else None)(
            psutil.Process(root.pid).children()), 10, what="two children")  # fmt: skip
        server = _fake_server(tmp_path, pane_pid=root.pid)
        agent = _agent("u-tree")
        (tmp_path / agent.uuid).mkdir()
        pane = SimpleNamespace(pane_id="%1")
        found = procs.collect(server, agent, pane)
        assert {root.pid, *(k.pid for k in kids)} <= set(found)
        procs.stop(server, agent, found, wait=True)
        for k in kids:
            until(lambda k=k: not _alive(k.pid, found[k.pid]), 10, what="child to end")
        assert root.wait(10) != 0
    finally:
        if root.poll() is None:
            root.kill()
        root.wait()
        _cleanup({k.pid: k.create_time() for k in kids if k.is_running()})


def test_observe_records_children_and_keeps_them_after_they_leave(tmp_path):
    """The monitor's observation persists (pid, create_time) of the tree; a child
    whose parent exits is still in the record when the agent ends."""
    root = subprocess.Popen(["sh", "-c", "sleep 1000 & echo x; wait"], stdout=subprocess.PIPE)
    try:
        root.stdout.readline()
        child = until(lambda: psutil.Process(root.pid).children(), 10, what="a child")[0]
        server = _fake_server(tmp_path)
        agent = _agent("u-obs")
        (tmp_path / agent.uuid).mkdir()
        procs._last_observe = 0.0
        procs.observe(server, [(agent, SimpleNamespace(pid=root.pid))])
        procs.forget(agent.uuid)  # a restarted server: only procs.json remains
        kept = procs.recorded(server, agent.uuid)
        assert kept.get(child.pid) == procs.start_of(child.pid)
        root.kill()
        root.wait()
        found = procs.collect(server, agent, None)
        assert child.pid in found
        procs.stop(server, agent, found, wait=True)
        until(lambda: not _alive(child.pid, found[child.pid]), 10, what="the child to end")
    finally:
        if root.poll() is None:
            root.kill()
        root.wait()
        if child.is_running():
            child.kill()


EXITS = """
nohup sleep 1000 >/dev/null 2>&1 &
echo $! > nohup.pid
while [ ! -e go ]; do sleep 0.05; done
exit 0
"""


def test_an_agent_that_exits_by_itself_takes_its_nohup_child_along(live, short_tmp):
    """The program exits (tmux keeps a dead pane; herdr drops it): the sleeper it
    left behind, known from the record, is ended with the agent (``exited``)."""
    work = _run_script(live, short_tmp, "d/quits", EXITS)
    found: dict[int, float] = {}
    try:
        pid = until(lambda: _pid(work / "nohup.pid"), 30, what="nohup.pid")
        found[pid] = psutil.Process(pid).create_time()
        uuid = live.get("d/quits")["uuid"]
        record = live.path / "agents" / uuid / "procs.json"
        until(
            lambda: (
                record.exists() and pid in {p for p, _ in json.loads(record.read_text())["procs"]}
            ),
            30,
            what="the sleeper to be recorded",
        )
        (work / "go").touch()
        r = live.run("agent", "wait", "d/quits", "--until", "ended", "--timeout", "30s", "--json")
        assert json.loads(r.stdout)["exit_reason"] == "exited"
        until(lambda: not _alive(pid, found[pid]), 30, what="the sleeper to end")
    finally:
        _cleanup(found)


def test_children_map_reads_a_parent_past_a_command_name_with_parentheses(tmp_path):
    """The process table is read from /proc/<pid>/stat, whose command name may hold
    spaces and ')' itself: the ppid is the field after the last ')'.
    Planted: ppid read after the first ')' -> the child is not under its parent -> fails."""
    odd = tmp_path / "x) 7 (y"
    odd.symlink_to(shutil.which("sleep"))
    parent = subprocess.Popen(["sh", "-c", f"'{odd}' 1000 & echo $!; wait"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        child = int(parent.stdout.readline())  # its pid, maybe before its exec
        until(lambda: psutil.Process(child).name().startswith("x) 7"), 10, what="the exec")
        assert child in procs._proc_children().get(parent.pid, [])  # the table pass
        assert child in procs.children_map().get(parent.pid, [])
    finally:
        _cleanup({p.pid: p.create_time() for p in psutil.Process(parent.pid).children()})
        parent.kill()
        parent.wait()


THREADED = """
import subprocess, sys, threading
procs, forked = [], threading.Event()
def other():  # forks, then lives on: the child is listed under this thread
    procs.append(subprocess.Popen(["sleep", "1000"]))
    forked.set()
    threading.Event().wait()
threading.Thread(target=other, daemon=True).start()
forked.wait()
procs.append(subprocess.Popen(["sleep", "1001"]))
print(" ".join(str(p.pid) for p in procs), flush=True)
sys.stdin.read()
"""


def test_a_tree_read_from_the_children_lists_is_the_table_passs(tmp_path):
    """Where Linux keeps each thread's children (``/proc/<pid>/task/*/children``), a
    tree is read from its root down, not from the whole process table: the same tree,
    children a thread forked included. Planted: the main thread's list only -> the
    sleeper the other thread forked is missed -> fails."""
    import sys

    if not procs._TASK_CHILDREN:
        import pytest

        pytest.skip("no /proc/<pid>/task/<tid>/children on this kernel")
    parent = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        kids = [int(p) for p in parent.stdout.readline().split()]
        root = (parent.pid, procs.start_of(parent.pid))
        lists = procs.tree(root, procs._ChildrenLists())
        assert set(kids) <= set(lists) and parent.pid in lists
        assert lists == procs.tree(root, procs._proc_children())
    finally:
        _cleanup({p.pid: p.create_time() for p in psutil.Process(parent.pid).children()})
        parent.kill()
        parent.wait()
