"""The run supervisor: waits on a run's command and records its exit durably.

A standalone script (standard library only, run as ``python -I -S
supervisor.py``) so it starts fast and never touches the store: the server
stays the single writer. The server keeps one spare supervisor warm; a fire
hands it a spec on stdin and it starts the command at once.

Protocol, one JSON line each way:

1. stdin: ``{"argv", "cwd", "env", "state", "log", "log_max"}``.
2. It claims the run by creating the state file with ``O_EXCL`` (recovery
   claims an abandoned run the same way, so exactly one side wins), then starts
   the argv directly (no shell) in its own process group with stdout and
   stderr on a pipe, and answers ``{"pid", "pgid", "start"}`` (or
   ``{"error"}``) on stdout, recording the same in the state file.
3. It copies the output into the log file up to ``log_max`` bytes (the rest is
   drained and counted, so a chatty command never blocks or fills the disk).
4. When the command exits, any process it left in its process group is killed
   (the group is safe to signal while the unreaped leader holds the pgid), and
   so is every other descendant: the supervisor is a child subreaper (Linux
   ``PR_SET_CHILD_SUBREAPER``), so a daemon that left the group with ``setsid``
   is reparented to it rather than to init when its parent exits, and is killed
   by pid (an unreaped child's pid cannot be reused). Then the exit status is
   written to the state file (fsync, atomic rename), and the supervisor exits.
   The server notices through a pidfd, or, after a restart, reads the state file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time


def proc_start(pid: int) -> float:
    """A process's start time in seconds since the epoch, computed as psutil's
    ``Process.create_time()`` is (start ticks after boot + boot time)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2 :].split()
    ticks = int(fields[19])  # field 22 of stat(5); fields here start at field 3
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                boot = float(line.split()[1])
                break
    return ticks / os.sysconf("SC_CLK_TCK") + boot


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphaned descendants are reparented to us, not to init (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children(me: int) -> set[int]:
    kids: set[int] = set()
    try:
        tids = os.listdir(f"/proc/{me}/task")
    except OSError:
        return kids
    for tid in tids:
        try:
            with open(f"/proc/{me}/task/{tid}/children") as f:
                kids.update(int(p) for p in f.read().split())
        except OSError:
            pass
    return kids


#: the mark a client sets on the orcr server it starts (orcr_core/sdk/client.py), which
#: every process that server starts inherits: its multiplexer, its agents
SERVER_TREE = b"ORCR_SERVER_TREE="


def _server_tree(pid: int) -> bool:
    """Is ``pid`` the orcr server's or one of its processes (its environment carries
    :data:`SERVER_TREE`)? A run's ``orcr`` call that found no server started one, so
    the server is in the run's tree: it must outlive the run, with its multiplexer and
    agents (the server ends the run's agents itself)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return (b"\0" + SERVER_TREE) in (b"\0" + f.read())
    except OSError:
        return False


def kill_descendants(keep: int) -> int:
    """SIGKILL every child of ours but ``keep`` (the command's zombie) and the orcr
    server's processes, and reap it, until none has appeared for a moment (orphans
    are reparented to a subreaper as their parents die). Returns how many were killed."""
    me, killed, quiet = os.getpid(), 0, 0
    spared: set[int] = set()
    deadline = time.monotonic() + 5.0
    while quiet < 3 and time.monotonic() < deadline:
        kids = _children(me) - {keep} - spared
        spared |= {pid for pid in kids if _server_tree(pid)}
        kids -= spared
        if not kids:
            quiet += 1
            time.sleep(0.01)
            continue
        quiet = 0
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return killed


def write_state(path: str, state: dict) -> None:
    """Replace the state file atomically and durably."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps(state).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def claim(path: str, state: dict) -> bool:
    """Create the state file if nobody has: the run is ours (True) or not."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    try:  # no fsync: O_EXCL is the exclusion; the command should not wait on the disk
        os.write(fd, json.dumps(state).encode())
    finally:
        os.close(fd)
    return True


def _copy(src, log_fd: int, limit: int, counts: dict) -> None:
    while True:
        try:
            chunk = os.read(src.fileno(), 65536)
        except OSError:
            break
        if not chunk:
            break
        counts["total"] += len(chunk)
        room = limit - counts["written"]
        if room > 0:
            part = chunk[:room]
            os.write(log_fd, part)
            counts["written"] += len(part)


def _answer(obj: dict) -> None:
    try:
        os.write(1, (json.dumps(obj) + "\n").encode())
    except OSError:  # the server died meanwhile: the state file is what counts
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the server stops listening after one line
    os.close(devnull)


def main() -> int:
    state = {"supervisor": os.getpid(), "supervisor_start": proc_start(os.getpid())}
    subreaper = become_subreaper()
    line = sys.stdin.readline()  # a warm spare waits here
    if not line:  # a spare whose server went away
        return 0
    spec = json.loads(line)
    if not claim(spec["state"], state):
        _answer({"error": "the run was claimed already (recovery closed it)"})
        return 0
    log_fd = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            spec["argv"],
            cwd=spec["cwd"],
            env=spec["env"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0,
            close_fds=True,
        )
    except OSError as exc:
        if not os.path.isdir(spec["cwd"]):
            msg = f"cannot start the run: the loop's directory {spec['cwd']} is gone"
        else:
            msg = f"cannot start {spec['argv'][0]!r}: {exc.strerror or exc}"
        os.write(log_fd, f"orcr: {msg}\n".encode())
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        write_state(spec["state"], dict(state, exit_code=code, error=msg, ended_at=time.time()))
        _answer({"error": msg})
        return 0
    try:
        start = proc_start(child.pid)
    except OSError:  # already gone and reaped: cannot happen before we wait, but be safe
        start = None
    state.update(pid=child.pid, pgid=child.pid, start=start)
    write_state(spec["state"], state)
    _answer({"pid": child.pid, "pgid": child.pid, "start": start})
    counts = {"written": 0, "total": 0}
    copier = threading.Thread(
        target=_copy, args=(child.stdout, log_fd, int(spec["log_max"]), counts), daemon=True
    )
    copier.start()
    # wait without reaping: the zombie leader keeps the pgid ours while we
    # clear out whatever it left running in its group
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    escaped = kill_descendants(keep=child.pid) if subreaper else 0
    code = child.wait()
    copier.join(5)  # without a subreaper a process outside the group may hold the pipe
    if escaped:
        os.write(
            log_fd,
            f"\n[orcr: killed {escaped} process(es) the command left outside its group]\n".encode(),
        )
    if counts["total"] > counts["written"]:
        os.write(
            log_fd,
            f"\n[orcr: log capped at {counts['written']} bytes; "
            f"{counts['total'] - counts['written']} more bytes dropped]\n".encode(),
        )
    os.close(log_fd)
    write_state(spec["state"], dict(state, exit_code=code, ended_at=time.time()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
