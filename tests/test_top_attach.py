"""``a`` in orcr top for real: ``orcr top`` runs on a real PTY (read back through
pyte, a terminal emulator), ``a`` suspends it and runs tmux's attach client on the
same terminal, the agent's window shows, typing reaches the agent's composer, a tmux detach (C-b d) ends the client and
top takes the terminal back; ``q`` quits."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

import pyte
import pytest

COLS, ROWS = 140, 40


class Screen(pyte.Screen):
    def scroll_up(self, count: int | None = None, *_args, **_kwargs) -> None:
        """CSI n S (SU), which pyte lacks: tmux scrolls the screen up this way."""
        top, bottom = self.margins or (0, self.lines - 1)
        x, y = self.cursor.x, self.cursor.y
        self.cursor.y = bottom
        for _ in range(count or 1):
            self.index()
        self.cursor.x, self.cursor.y = x, y


class Stream(pyte.ByteStream):
    csi = {**pyte.ByteStream.csi, "S": "scroll_up"}


class Terminal:
    """A program on a PTY of its own (its controlling terminal), and the screen it draws."""

    def __init__(self, argv: list[str], env: dict):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))

        def controlling_tty():  # runs in the child after setsid (start_new_session)
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=controlling_tty,
        )
        os.close(slave)
        self.screen = Screen(COLS, ROWS)
        self.stream = Stream(self.screen)

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the program closed the terminal
                return
            self.stream.feed(data)

    def until(self, cond, what: str, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = cond()
            if value:
                return value
            self.pump(0.1)
        raise AssertionError(f"{what} not on the terminal in {timeout}s:\n{self.text()}")

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)


def _clients(live) -> list[str]:
    res = subprocess.run(
        ["tmux", "-S", str(live.mux.socket), "list-clients", "-F", "#{client_tty}"],
        capture_output=True,
        text=True,
    )
    return res.stdout.split()


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_attaches_on_the_same_terminal_and_top_comes_back_after_a_detach(live):
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "at/one", "hello from the pane", check=True)
    live.run("agent", "wait", "at/one", "--timeout", "30s", check=True)
    env = dict(live.env, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
    term = Terminal([sys.executable, "-m", "orcr_core.cli", "top"], env)
    try:
        term.until(lambda: "at/one" in term.text() and "PROVIDER" in term.text(), "top's rows")
        assert _clients(live) == []
        term.type(b"\x1b[B")  # down: from the group line to the agent
        term.until(lambda: "Attach" in term.text(), "the footer")
        term.type(b"a")
        # top hands the terminal over: tmux's client shows the agent's window...
        term.until(lambda: "at/one*" in term.text(), "tmux's status line")
        assert len(_clients(live)) == 1  # one tmux client: the one top started
        assert "PROVIDER" not in term.text()
        # ... and what is typed goes to the agent: its composer echoes it
        term.type(b"typed in the pane")
        term.until(lambda: "> typed in the pane" in term.text(), "the agent's composer")
        term.type(b"\x7f" * len("typed in the pane"))  # leave the composer empty
        term.until(lambda: "typed in the pane" not in term.text(), "the composer emptied")
        term.type(b"\x02d")  # tmux's prefix, then d: detach
        term.until(lambda: "PROVIDER" in term.text() and "at/one" in term.text(), "top again")
        assert _clients(live) == []
        assert term.proc.poll() is None  # top is still running
        term.type(b"q")
        term.until(lambda: term.proc.poll() is not None, "top quitting")
        assert term.proc.returncode == 0
    finally:
        term.close()
