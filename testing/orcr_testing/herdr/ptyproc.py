"""A pane's process on a real PTY, its output rendered by pyte.

The argv is executed directly (no shell) as a session leader whose
controlling terminal is the PTY slave, like a terminal multiplexer does. One
reader thread per pane feeds a :class:`pyte.HistoryScreen`; terminal queries
(DSR, DA) are answered back into the PTY so TUIs that probe the terminal work.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time

import psutil
import pyte

BRACKETED_PASTE = 2004 << 5  # pyte stores DEC private modes shifted by 5


#: what a multiplexer sets back to default in a pane's process (portable-pty's spawn,
#: which herdr uses, like tmux): a server started in the background of a script ignores
#: SIGINT and SIGQUIT, and a pane's program inherited that (Ctrl+C did nothing)
_DEFAULT_SIGNALS = (
    signal.SIGCHLD, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGALRM
)  # fmt: skip


def _take_controlling_tty() -> None:  # runs in the child after setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    for sig in _DEFAULT_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


class _Screen(pyte.HistoryScreen):
    def __init__(self, cols: int, rows: int, reply):
        super().__init__(cols, rows, history=2000, ratio=0.5)
        self._reply = reply

    def write_process_input(self, data: str) -> None:
        self._reply(data.encode())

    def select_graphic_rendition(self, *attrs, private=False):
        """A private SGR (``CSI > 4 ; 2 m``, xterm's modifyOtherKeys, which Gemini CLI
        sends at start) sets no rendition: ignored. pyte passes ``private`` and its own
        handler takes none, so the pane's reader thread died on it."""
        if not private:
            super().select_graphic_rendition(*attrs)


class PaneProcess:
    """One running argv on its own PTY. ``returncode`` is None while it runs."""

    def __init__(
        self, argv: list[str], cwd: str, env: dict[str, str], rows: int = 24, cols: int = 80
    ):
        self.argv = list(argv)
        self.rows, self.cols = rows, cols
        self.lock = threading.Lock()
        self.screen = _Screen(cols, rows, self._reply)
        self.stream = pyte.ByteStream(self.screen)
        self.output_revision = 0
        self._closed = threading.Event()
        self._fd_lock = threading.Lock()  # fd numbers are reused: never write to a closed one
        master, slave = os.openpty()
        try:
            self.tty = os.ttyname(slave)
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            self.popen = subprocess.Popen(
                self.argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=_take_controlling_tty,
                close_fds=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self.fd = master
        self.pid = self.popen.pid
        self._reader = threading.Thread(target=self._read_loop, name=f"pty-{self.pid}", daemon=True)
        self._reader.start()

    # -- output -------------------------------------------------------------
    def _read_loop(self) -> None:
        fd = self.fd
        try:
            while not self._closed.is_set():
                ready, _, _ = select.select([fd], [], [], 0.1)
                if not ready:
                    continue
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:  # EIO: every slave fd is closed
                    break
                if not data:
                    break
                with self.lock:
                    self.stream.feed(data)
                    self.output_revision += 1
        finally:
            self._closed.set()
            self._wait_closed_then_close_fd()

    def _wait_closed_then_close_fd(self) -> None:
        with self._fd_lock:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def _reply(self, data: bytes) -> None:
        try:
            self.write(data, timeout=0.5)
        except OSError:
            pass

    # -- input --------------------------------------------------------------
    def write(self, data: bytes, timeout: float = 5.0) -> None:
        """Write everything or raise OSError (the app stopped reading for ``timeout``)."""
        deadline = time.monotonic() + timeout
        view = memoryview(data)
        while view:
            try:
                with self._fd_lock:
                    if self.fd < 0 or self._closed.is_set():
                        raise OSError(errno.EIO, "pane terminal is closed")
                    fd = self.fd
                    n = os.write(fd, view)
                view = view[n:]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise OSError(errno.ETIMEDOUT, "pane input blocked") from None
                time.sleep(min(left, 0.01))

    # -- state --------------------------------------------------------------
    @property
    def bracketed_paste(self) -> bool:
        with self.lock:
            return BRACKETED_PASTE in self.screen.mode

    @property
    def title(self) -> str:
        with self.lock:
            return self.screen.title or ""

    def visible_lines(self) -> list[str]:
        with self.lock:
            return [line.rstrip() for line in self.screen.display]

    def history_lines(self) -> list[str]:
        with self.lock:
            cols = self.screen.columns
            return [
                "".join(row[x].data for x in range(cols)).rstrip()
                for row in self.screen.history.top
            ]

    def poll(self) -> int | None:
        return self.popen.poll()

    def foreground_pgid(self) -> int | None:
        try:
            with self._fd_lock:
                return os.tcgetpgrp(self.fd)
        except OSError:
            return None

    def foreground_names(self) -> list[str]:
        """Names of the PTY's foreground process: comm, argv0 and a script argument.

        That is what herdr's detection inspects (``claude`` run by node shows up
        as ``node .../claude``; a shebang script's comm is the script's name).
        """
        pgid = self.foreground_pgid()
        if pgid is None:
            return []
        try:
            proc = psutil.Process(pgid)
            names = [proc.name()]
            cmdline = proc.cmdline()
        except (OSError, psutil.Error):
            return []
        names += [os.path.basename(arg) for arg in cmdline[:2]]
        return names

    def terminate(self, grace: float = 1.0) -> None:
        """Hang up the terminal, then SIGKILL the whole tree after ``grace`` (in the background)."""
        try:
            tree = [psutil.Process(self.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.Error:
            tree = []
        try:
            os.killpg(self.pid, signal.SIGHUP)
        except OSError:
            pass
        self._closed.set()

        def reap() -> None:
            _, alive = psutil.wait_procs(tree, timeout=grace)
            for proc in alive:
                try:
                    proc.kill()
                except psutil.Error:
                    pass
            try:
                self.popen.wait(timeout=grace + 1)
            except subprocess.TimeoutExpired:
                pass

        threading.Thread(target=reap, name=f"reap-{self.pid}", daemon=True).start()

    def kill_now(self) -> None:
        """Synchronous SIGKILL of the tree (server stop): nothing is left behind."""
        try:
            tree = [psutil.Process(self.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.Error:
            tree = []
        for proc in tree:
            try:
                proc.kill()
            except psutil.Error:
                pass
        self._closed.set()
        psutil.wait_procs(tree, timeout=2)
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
