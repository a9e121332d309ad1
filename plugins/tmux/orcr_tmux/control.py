"""tmux's own pane events, from control-mode clients (``tmux -C``).

One control client attaches to each of orcr's sessions (``orcr-<level1>``) with
``-f no-output,ignore-size``: it receives no pane output and never resizes a
window. It is told, by tmux itself:

* ``%window-close`` / ``%unlinked-window-close``: a window closed (an agent
  pane killed, by orcr or by anyone else; a control client hears about the
  windows of every session, its own and the others);
* ``%subscription-changed`` of a ``#{pane_dead}`` subscription over every pane
  of its session (``refresh-client -B``, tmux >= 3.2): an agent's process
  exited and ``remain-on-exit`` kept its dead pane. tmux checks subscriptions
  about once a second, so this one arrives within a second;
* ``%sessions-changed`` (a workspace session came or went: the set of clients is
  rebuilt) and ``%exit`` (its session or the whole server is gone).

A control client never outlives the server thread that started it (issue 33
item 9: seven were found with PPID 1, 20 minutes after ``orcr server stop``). Its
stdin reaching EOF ends it only once the tmux server reads that EOF (tmux hands
the client's stdin to its server), and the stream's own cleanup (the ``finally``
below) does not run when the process exits with the stream's daemon thread in
``select``, on ``os._exit`` or on SIGKILL. So on Linux each client starts under a
small wrapper that sets ``PR_SET_PDEATHSIG`` (SIGTERM, which ends a tmux client
even while its server is stopped) and then execs tmux: the kernel ends it when
the thread that started it (the server's ``orcr-mux-events``) ends, however it
ends (tests/test_control_clients.py).

Everything is a hint: the core takes a snapshot and compares. A tmux hook
(``set-hook -g pane-died``) was tried first and rejected: hook commands resolve
their target window inconsistently across sessions and the notifications their
side effects should cause did not reach control clients on tmux 3.3.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

from orcr_core.contracts import DriverError
from orcr_tmux.layout import SESSION_PREFIX
from orcr_tmux.tmuxcli import Tmux, TmuxError

SUBSCRIPTION = "orcr-dead"
_SUBSCRIBE = f'refresh-client -B "{SUBSCRIPTION}:%*:#{{pane_dead}}"\n'


def parse(line: str) -> dict | None:
    """One control-mode line as an orcr event, or None when it says nothing about panes."""
    word, _, rest = line.partition(" ")
    if word in ("%window-close", "%unlinked-window-close"):
        return {"event": "window_closed", "data": {"window_id": rest.strip()}}
    if word == "%subscription-changed":
        # %subscription-changed NAME $S @W INDEX %P ... : VALUE
        head, _, value = rest.partition(" : ")
        fields = head.split()
        if fields and fields[0] == SUBSCRIPTION and value.strip() == "1" and len(fields) >= 5:
            return {"event": "pane_exited", "data": {"pane_id": fields[4]}}
        return None
    if word == "%sessions-changed":
        return {"event": "sessions_changed", "data": {}}
    if word == "%exit":
        return {"event": "exit", "data": {}}
    return None


class _Client:
    """One control client's handshake: attach, then subscribe, then events.

    The subscription is sent only once tmux says the client is attached
    (``%session-changed``): sent earlier, tmux may run it before the attach and
    answer ``no current client`` — and that client would never hear a pane die.
    The stream counts as started only once tmux accepted the subscription."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.buf = b""
        self.state = "attaching"  # -> "subscribing" -> "live"

    def step(self, line: str) -> bool:
        """Feed one handshake line; True when this client has just become live."""
        if self.state == "attaching" and line.startswith("%session-changed"):
            self.proc.stdin.write(_SUBSCRIBE.encode())
            self.proc.stdin.flush()
            self.state = "subscribing"
        elif self.state == "subscribing" and line.startswith("%error ") and line.endswith(" 1"):
            raise DriverError("tmux refused orcr's pane subscription", retryable=True)
        elif self.state == "subscribing" and line.startswith("%end ") and line.endswith(" 1"):
            self.state = "live"  # the reply to our command (flags 1: sent by this client)
            return True
        return False


#: exec argv[2:] once the kernel will SIGTERM it when its parent thread ends (Linux's
#: PR_SET_PDEATHSIG, 1); a parent already gone (argv[1] no longer the parent) ends it
_PDEATHSIG = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(0)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def bound_to_this_thread(argv: list[str]) -> list[str]:
    """``argv`` run so that it ends when the calling thread does (Linux; elsewhere as is)."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-I", "-S", "-c", _PDEATHSIG, str(os.getpid()), *argv]


def end_client(proc: subprocess.Popen) -> None:
    """End a control client: its stdin closed, TERM, KILL after 2 s; reaped."""
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()
        except OSError:
            pass
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def control_argv(tmux: Tmux, session: str) -> list[str]:
    """A control client attached to ``session`` that gets no pane output and never
    resizes a window (``-f no-output,ignore-size``)."""
    argv = tmux.argv(["attach-session", "-t", "=" + session, "-f", "no-output,ignore-size"])
    argv.insert(1, "-C")
    return argv


def sessions(tmux: Tmux) -> list[str]:
    """orcr's sessions on its tmux server (none when no server runs)."""
    try:
        out = tmux.run(["list-sessions", "-F", "#{session_name}"])
    except TmuxError as exc:
        if exc.code == "server_not_running":
            return []
        raise
    return [n for n in out.split() if n.startswith(SESSION_PREFIX)]


def events(
    tmux: Tmux,
    stop: threading.Event | None = None,
    on_start: Callable[[], None] | None = None,
) -> Iterator[dict]:
    """Yield pane events until a session comes or goes (then the caller reconnects)."""
    names = sessions(tmux)
    if not names:
        raise DriverError("no orcr tmux session to follow yet", code="no_session", retryable=True)
    procs: list[subprocess.Popen] = []
    sel = selectors.DefaultSelector()
    try:
        for name in names:
            proc = subprocess.Popen(
                bound_to_this_thread(control_argv(tmux, name)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=tmux._env(),
                start_new_session=True,
            )
            procs.append(proc)
            os.set_blocking(proc.stdout.fileno(), False)
            sel.register(proc.stdout, selectors.EVENT_READ, _Client(proc))
        started = False
        pending = len(procs)
        while stop is None or not stop.is_set():
            for key, _ in sel.select(timeout=1.0):
                client = key.data
                try:
                    chunk = os.read(key.fileobj.fileno(), 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return  # the client ended (its session or the server is gone)
                client.buf += chunk
                while b"\n" in client.buf:
                    raw, client.buf = client.buf.split(b"\n", 1)
                    line = raw.decode("utf-8", "replace").rstrip("\r")
                    if client.step(line):  # attached and subscribed
                        pending -= 1
                        if pending == 0 and not started:
                            started = True
                            if on_start is not None:
                                on_start()
                        continue
                    ev = parse(line)
                    if ev is None:
                        continue
                    yield ev
                    if ev["event"] in ("sessions_changed", "exit"):
                        return  # rebuild the set of clients
    finally:
        sel.close()
        for proc in procs:
            end_client(proc)
