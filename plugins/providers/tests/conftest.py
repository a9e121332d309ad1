"""A real PTY harness for the echo agent: spawn it, type, read the screen (pyte)."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import termios
import time
from collections.abc import Callable

import pyte
import pytest
from orcr_providers.echo import EchoProvider

from orcr_core.contracts import LaunchSpec

ROWS, COLS = 24, 80


class EchoPty:
    """One echo agent on a fresh PTY, started with the provider's own argv."""

    def __init__(self, data_dir: str) -> None:
        os.makedirs(data_dir, exist_ok=True)
        self.spec = LaunchSpec(uuid="u1", path="t/echo", cwd=data_dir, data_dir=data_dir)
        self.provider = EchoProvider()
        self.transcript_path = self.provider.transcript_path(self.spec)
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(
            self.provider.launch_argv(self.spec),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=data_dir,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.raw = b""

    def pump(self, timeout: float = 0.05) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        while ready:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO once the agent is gone
                return
            if not data:
                return
            self.raw += data
            self.stream.feed(data)
            ready, _, _ = select.select([self.master], [], [], 0)

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def records(self) -> list[dict]:
        try:
            with open(self.transcript_path, "rb") as f:
                return [json.loads(line) for line in f.read().splitlines()]
        except FileNotFoundError:
            return []

    def prompts(self) -> list[dict]:
        return [r for r in self.records() if r["type"] == "prompt"]

    def wait(self, predicate: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what or predicate}\nscreen:\n{self.text()}\n"
                    f"transcript: {self.records()}"
                )

    def wait_screen(self, needle: str, timeout: float = 5.0) -> None:
        self.wait(lambda: needle in self.text(), timeout, f"screen to show {needle!r}")

    def ready(self) -> EchoPty:
        self.wait_screen("orcr echo agent")
        return self

    def exit_code(self, timeout: float = 5.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.pump()
        # what it wrote just before it exited may still wait in the terminal (read to EIO)
        self.pump(0.2)
        return self.proc.wait(timeout=0.1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        os.close(self.master)


@pytest.fixture
def echo_pty(tmp_path):
    agents: list[EchoPty] = []

    def start() -> EchoPty:
        agent = EchoPty(str(tmp_path / f"agent{len(agents)}"))
        agents.append(agent)
        return agent.ready()

    yield start
    for agent in agents:
        agent.close()
