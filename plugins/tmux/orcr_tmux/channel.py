"""Screen reads and pid lookups over one control-mode client, not a client per call.

Every other tmux call is a ``tmux`` client process: ~0.4 ms of the server's CPU to
start and reap, and a screen read is the call orcr makes most (several per agent
start, every look at a TUI's composer or dialog). :class:`QueryChannel` keeps one
control-mode client (``tmux -C attach-session -f no-output,ignore-size``) and sends
it the read-only queries (``capture-pane``, ``display-message``) as lines; tmux
answers each command in a ``%begin``/``%end`` (or ``%error``) block.

What a pane prints comes back inside those blocks verbatim, so the pane could print a
line that looks like the end of the block. Each request is therefore the commands,
then ``display-message`` of a random token in the same command list, then another
random token on a line of its own (run even when the list failed): the reply is
everything up to the second token's block, whatever the pane printed, and a reply
whose framing does not add up (a block ended early, text between blocks) is not
trusted: the channel is closed and the query runs as a client process, as does
every query while there is no channel (no orcr session to attach to, tmux gone or
restarted, an argument tmux's command parser would need escapes for). So a query
answers exactly as ``Tmux.run`` would, errors and their codes included
(plugins/tmux/tests/test_tmux_channel.py holds the two to the same answers).

The client is started from a thread of its own that lives as long as the channel:
the same ``PR_SET_PDEATHSIG`` wrapper as the event clients (:mod:`orcr_tmux.control`)
ends it with the channel or with the server, however the server ends.

Not for ``list-panes``: a snapshot through a client that is already connected would
succeed while tmux's socket file is gone, and the snapshot is how orcr notices that
outage (:mod:`orcr_tmux.snapshot`).
"""

from __future__ import annotations

import os
import re
import secrets
import select
import subprocess
import threading
import time
from collections.abc import Sequence

from orcr_core.contracts import DriverError
from orcr_tmux.control import bound_to_this_thread, control_argv, end_client, sessions
from orcr_tmux.tmuxcli import Tmux, TmuxError, classify

#: arguments sent as ``'...'`` on a command line: anything else goes as a process
_PLAIN = re.compile(r"[^'\x00-\x1f\x7f]*")
#: seconds before a channel that could not be made is tried again
RETRY_AFTER = 1.0


class _Desync(Exception):
    """The reply's framing does not add up: the channel is not trusted again."""


class QueryChannel:
    """One control-mode client for read-only queries, with a client process per
    query as the fallback (:meth:`query` has ``Tmux.run``'s signature and answers)."""

    def __init__(self, tmux: Tmux):
        self.tmux = tmux
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._retry_at = 0.0
        self.answered = 0  # queries the channel answered (tests, bench)

    def query(self, *commands: Sequence[str]) -> str:
        line = _command_line(commands)
        if line is None:
            return self.tmux.run(*commands)
        blocks = None
        with self._lock:
            if self._proc is not None or self._connect():
                try:
                    blocks = self._ask(line)
                    self.answered += 1
                except _Desync:
                    self._close()
        if blocks is None:  # as a client process, outside the lock
            return self.tmux.run(*commands)
        ok, content = blocks
        out = "".join(f"{text}\n" for text in content)
        if ok:
            return out
        err = out.strip()
        name = commands[0][0] if commands else ""
        raise TmuxError(f"tmux {name} failed: {err}", code=classify(err))

    def close(self) -> None:
        with self._lock:
            self._close()

    # -- the client ------------------------------------------------------------------
    def _connect(self) -> bool:
        if time.monotonic() < self._retry_at:
            return False
        self._retry_at = time.monotonic() + RETRY_AFTER
        try:
            names = sessions(self.tmux)
        except DriverError:
            return False
        if not names:
            return False
        argv = control_argv(self.tmux, names[0])
        started: dict = {}
        ready = threading.Event()

        def hold() -> None:  # the client lives as long as this thread (PDEATHSIG)
            try:
                started["proc"] = subprocess.Popen(
                    bound_to_this_thread(argv),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=self.tmux._env(),
                    start_new_session=True,
                )
            except OSError:
                pass
            ready.set()
            if "proc" in started:
                started["proc"].wait()  # until the channel closes it, or it ends itself

        threading.Thread(target=hold, name="orcr-tmux-channel", daemon=True).start()
        ready.wait()
        proc = started.get("proc")
        if proc is None:
            return False
        self._proc, self._buf = proc, b""
        return True

    def _close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            end_client(proc)

    def _ask(self, line: str) -> tuple[bool, list[str]]:
        """Send one request; its first command list's outcome and output."""
        first, second = secrets.token_hex(8), secrets.token_hex(8)
        request = f"{line} ; display-message -p {first}\ndisplay-message -p {second}\n"
        proc = self._proc
        try:
            proc.stdin.write(request.encode())
            proc.stdin.flush()
        except OSError:
            raise _Desync from None
        blocks: list[tuple[bool, list[str]]] = []
        deadline = time.monotonic() + self.tmux.timeout
        head: str | None = None
        content: list[str] = []
        while True:
            text = self._line(proc, deadline)
            if head is None:
                if text.startswith("%begin "):
                    head, content = text[len("%begin ") :], []
                elif text.startswith(("%end ", "%error ")) or not text.startswith("%"):
                    raise _Desync  # a block's end, or text, outside any block
                continue  # a notification between blocks
            if text in (f"%end {head}", f"%error {head}"):
                if head.endswith(" 1"):  # sent by this client (0: tmux's own, the attach)
                    blocks.append((text.startswith("%end"), content))
                head = None
                if blocks and blocks[-1] == (True, [second]):
                    break
                continue
            content.append(text)
        return _outcome(blocks[:-1], first)

    def _line(self, proc: subprocess.Popen, deadline: float) -> str:
        fd = proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._close()
                raise DriverError(
                    f"tmux did not answer within {self.tmux.timeout:g}s (control mode)",
                    code="tmux_timeout",
                    retryable=True,
                )
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _Desync  # the client ended: its session or tmux is gone
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\n", 1)
        return raw.decode("utf-8", "replace")


def _outcome(blocks: list[tuple[bool, list[str]]], token: str) -> tuple[bool, list[str]]:
    """The command list's blocks, then its token's when it ran to the end: success and
    the commands' output joined; or the block that failed and its message."""
    if blocks and blocks[-1] == (True, [token]):
        if not all(ok for ok, _ in blocks[:-1]):
            raise _Desync
        return True, [text for _, content in blocks[:-1] for text in content]
    if blocks and not blocks[-1][0] and all(ok for ok, _ in blocks[:-1]):
        return False, blocks[-1][1]
    raise _Desync


def _command_line(commands: Sequence[Sequence[str]]) -> str | None:
    """The commands as one control-mode line, every argument single-quoted; None when
    one holds a quote or a control character (tmux's parser would need escapes)."""
    parts = []
    for command in commands:
        if not command or not all(_PLAIN.fullmatch(arg) for arg in command):
            return None
        parts.append(" ".join(f"'{arg}'" for arg in command))
    return " ; ".join(parts)
