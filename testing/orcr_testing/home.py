"""``OrcrHome``: a private orcr installation for a test (its env, config, server
process and CLI runner); the ``orcr_home`` fixture (orcr_testing.plugin) makes one."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from orcr_core.kit.testing import until
from orcr_testing.incli import in_process
from orcr_testing.procgroup import TestGroup


def processes_under(home: Path) -> list[tuple[int, str]]:
    """``(pid, name)`` of every process but this one whose environment has
    ``ORCR_HOME=home``: read raw from ``/proc/PID/environ``, unparsed. The walk over the
    whole machine that :meth:`OrcrHome.reap` falls back to without a test group."""
    me = os.getpid()
    pids = (int(e.name) for e in os.scandir("/proc") if e.name.isdigit())
    return of_home((pid for pid in pids if pid != me), home)


def of_home(pids: Iterable[int], home: Path) -> list[tuple[int, str]]:
    """``(pid, name)`` of those of ``pids`` whose environment has ``ORCR_HOME=home``
    (the whole variable: a home whose path starts with this one's is another)."""
    needle, found = f"ORCR_HOME={home}\0".encode(), []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
            if b"\0" + needle in environ or environ.startswith(needle):
                with open(f"/proc/{pid}/comm") as fh:
                    found.append((pid, fh.read().strip()))
        except OSError:
            continue
    return found


def _listening_holder(lock: Path) -> int | None:
    """The pid the server lock names as listening while the lock is held (the lock
    file's format, ``<pid> listening <socket>``: orcr_core/server/lockfile.py), else None."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held
            words = os.pread(fd, 4096, 0).decode(errors="replace").split()
            if len(words) > 1 and words[0].isdigit() and words[1] == "listening":
                return int(words[0])
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: its fds are closed)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class OrcrHome:
    """A private orcr installation: env, config, server process, CLI runner."""

    def __init__(self, path: Path, env: dict, group: TestGroup | None = None):
        self.path = path
        self.env = env
        self.proc: subprocess.Popen | None = None
        #: the test's freezer cgroup (orcr_testing.procgroup), where ``reap`` looks;
        #: None: it walks ``/proc``
        self.group = group

    @property
    def socket(self) -> Path:
        return self.path / "run" / "orcr.sock"

    def config(self, text: str) -> None:
        (self.path / "config.toml").write_text(text)

    def start_server(self, extra_env: dict | None = None, wait: bool = True) -> subprocess.Popen:
        env = dict(self.env, **(extra_env or {}))
        log = open(self.path / "server.out", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orcr_core.server"],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        if wait:
            self.wait_socket()
        return self.proc

    def run_second_server(self, timeout: float = 60) -> subprocess.CompletedProcess:
        """Start another server on this home in the foreground: with one running, it
        must refuse (and exit) at once."""
        return subprocess.run(
            [sys.executable, "-m", "orcr_core.server"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def listening(self) -> bool:
        """Whether a server holds this home's lock as listening (:func:`_listening_holder`)."""
        return _listening_holder(self.path / "run" / "server.lock") is not None

    def wait_socket(self, timeout: float = 15.0) -> None:
        """Wait until a live server listens: the lock file names a running process as
        listening, and the socket accepts (the server ``proc`` started, or one that
        already ran here: then ``proc`` exits, as before).

        A connect alone proves nothing: a server SIGKILLed while it forks (its loop
        spares, right after it starts) leaves the child, between fork and exec, holding
        a copy of its listening socket and its lock; on a loaded machine that lasts long
        enough for a connect to succeed with no server behind it, and the next call then
        found none ("no orcr server at ...": test_resume_crash, test_watch_restart)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.server_log()}")
            pid = _listening_holder(self.path / "run" / "server.lock")
            if pid is not None and _alive(pid):
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(5)
                try:
                    s.connect(str(self.socket))
                    return
                except OSError:
                    pass
                finally:
                    s.close()
            time.sleep(0.02)
        raise TimeoutError(f"server socket did not appear: {self.server_log()}")

    def events(self, agent: str | None = None) -> list[dict]:
        """The event log as the store holds it (read directly, as an auditor would)."""
        import json
        import sqlite3

        conn = sqlite3.connect(self.path / "store.db")
        try:
            rows = conn.execute(
                "SELECT seq, ts, kind, agent, data FROM event"
                + (" WHERE agent = ?" if agent else "")
                + " ORDER BY seq",
                (agent,) if agent else (),
            ).fetchall()
        finally:
            conn.close()
        keys = ("seq", "ts", "kind", "agent", "data")
        return [dict(zip(keys, (*r[:4], json.loads(r[4])), strict=True)) for r in rows]

    def server_log(self) -> str:
        p = self.path / "server.out"
        return p.read_text()[-4000:] if p.exists() else ""

    def kill_server(self) -> None:
        """SIGKILL: no cleanup at all, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def reap(self) -> list[str]:
        """End whatever still runs under this home once the test is over: a server a CLI
        verb autostarted, the tmux server it started, their panes. Found by ORCR_HOME in
        their environment; returns what it killed (so a test run leaves nothing behind).

        Where to look: the test's freezer cgroup (``self.group``, orcr_testing.procgroup),
        which every process the test started is in, however it detached (double fork,
        setsid, a ceiling's memory/pids/cpu cgroup): only its members' environments are
        read, and one without this ``ORCR_HOME`` (a session's PostgreSQL cluster that
        started during the test) is left alone, as before. Without a group (not root,
        no cgroup v1 freezer hierarchy) it walks every process in ``/proc``
        (:func:`processes_under`), reading raw environments. Another pass only while a
        pass found something, for what a dying process started."""
        killed: dict[int, str] = {}
        for _ in range(3 if self.group is None else 10):
            # A process SIGKILLed in one pass can still be in /proc (dying) in the next:
            # only a pid not yet killed counts, or one kill was counted two or three times.
            if self.group is None:
                under = processes_under(self.path)
            else:
                under = of_home(self.group.members(), self.path)
            found = [(pid, name) for pid, name in under if pid not in killed]
            for pid, name in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed[pid] = name
                except OSError:
                    continue
            if not found:
                break
        return list(killed.values())

    def stop_server(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill_server()

    def run(
        self,
        *args,
        input: str | None = None,
        check: bool = False,
        timeout: float = 60,
        env: dict | None = None,
        process: bool = False,
    ) -> subprocess.CompletedProcess:
        """``orcr ARGS``: the CLI's fast path run in this process (:func:`in_process`)
        when it can, else a CLI process; ``process=True`` always the process."""
        res = None
        if not process and input is None and env is None and self.listening():
            res = in_process(self.env, [str(a) for a in args])
        if res is None:
            res = subprocess.run(
                [sys.executable, "-m", "orcr_core.cli", *args],
                env=dict(self.env, **(env or {})),
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        if check and res.returncode != 0:
            raise AssertionError(f"orcr {' '.join(args)} exited {res.returncode}: {res.stderr}")
        return res

    def get(self, path: str) -> dict:
        """``orcr agent get PATH --json`` (PATH or UUID): asked through the SDK in this
        process while the server answers (what the CLI prints is the SDK's dict, dumped),
        else through the real CLI, which autostarts a server and words the error."""
        return self.ask(lambda o: o.get(path), "agent", "get", path, "--json")

    def ended(self, path: str, timeout: float = 30) -> dict:
        """Wait until the agent at ``path`` (or UUID) has ended; its row."""
        return until(
            lambda: (lambda a: a if a["status"] == "ended" else None)(self.get(path)),
            timeout,
            what=f"{path} to end",
        )

    def status(self) -> dict:
        """``orcr server status --json``: through the SDK while the server answers, else
        through the real CLI (which words the error)."""
        return self.ask(lambda o: o.status(), "server", "status", "--json")

    def ask(self, call, *args: str) -> dict:
        """``call(sdk)`` on the running server, as the CLI's ``args`` would print it; the
        real CLI (``run(*args, check=True)``) when no server answers or the call fails.
        A poll then costs a socket round trip, not a Python process (0.2-0.4 s each)."""
        import json

        from orcr_core.sdk.client import ServerError

        if self.socket.exists():
            try:
                with self.sdk() as o:
                    return json.loads(json.dumps(call(o)))
            except (ServerError, OSError):
                pass  # none answers, or the call failed: the CLI says how, as before
        return json.loads(self.run(*args, check=True).stdout)

    #: what :meth:`save` copies: the store and the test driver's "multiplexer" state
    SAVED = ("store.db", "store.db-wal", "store.db-shm", "testdriver.json")

    def save(self, to: Path) -> None:
        """Copy the store and the test driver's panes to ``to`` (the server stopped),
        for :meth:`restore` to bring back: a crash test replays from the same start."""
        to.mkdir(parents=True, exist_ok=True)
        for name in self.SAVED:
            if (self.path / name).exists():
                shutil.copy2(self.path / name, to / name)

    def restore(self, frm: Path) -> None:
        for name in self.SAVED:
            (self.path / name).unlink(missing_ok=True)
            if (frm / name).exists():
                shutil.copy2(frm / name, self.path / name)

    def crashed_after_commit(self, n: int, saved: Path, done, what: str, first=None) -> bool:
        """Replay from ``saved`` (see :meth:`save`) with the server set to SIGKILL
        itself right after its ``n``-th commit (``ORCR_FAULT=after_commit:n``): once
        its socket is up, ``first()`` (if given), then wait until ``done(sdk)`` holds
        or the server is dead; stop it. True when the fault killed it."""
        from orcr_core.sdk.client import ServerError

        self.restore(saved)
        self.start_server(extra_env={"ORCR_FAULT": f"after_commit:{n}"}, wait=False)
        try:
            self.wait_socket()
            if first is not None:
                first()
            with self.sdk() as o:
                until(lambda: self.proc.poll() is not None or done(o), 30, what)
        except (RuntimeError, OSError, ServerError):
            pass  # died while starting, or mid-call
        self.stop_server()  # a clean stop, unless the fault killed it first
        return self.proc.returncode == -signal.SIGKILL

    def sdk(self):
        from orcr_core.sdk import Orcr
        from orcr_core.sdk.client import Client

        return Orcr(Client(self.socket, autostart=False))
