"""Typing a prompt into a pane (the two-call rule) and what a dead pane says."""

from __future__ import annotations

import os
import re
import secrets
import signal
import time

from orcr_core.contracts import DriverError, PaneRef
from orcr_tmux.layout import INSTANCE_OPTION, TOKEN_OPTION
from orcr_tmux.tmuxcli import Tmux, TmuxError

#: What the dead-pane branch of a guarded paste prints (see :meth:`Prompt.send`).
DEAD_MARKER = "orcr-pane-dead"
#: printed instead of typing when the pane id names a pane without the agent's marks
NOT_MINE_MARKER = "orcr-pane-not-mine"
_MARKS = re.compile(r"[A-Za-z0-9_-]*:[A-Za-z0-9_-]*")


def tail_words(text: str, limit: int = 200) -> str:
    """The end of ``text`` (where an error says what failed), at most ``limit``
    characters, cut at a word boundary and marked with an ellipsis: never mid-word."""
    if len(text) <= limit:
        return text
    tail = text[-(limit - 1) :]
    space = tail.find(" ")
    if 0 <= space < len(tail) - 1:
        tail = tail[space + 1 :]
    return "…" + tail


class Prompt:
    """Typing prompts into panes, a part of :class:`orcr_tmux.driver.TmuxDriver`:
    it holds only the :class:`~orcr_tmux.tmuxcli.Tmux` it types through, the pause
    between the text and its Enter (``delay``, the driver's ``prompt_delay``) and
    when it last pasted into each pane."""

    def __init__(self, tmux: Tmux, delay: float):
        self.tmux = tmux
        #: Pause between the prompt text and its Enter (the two-call rule).
        self.delay = delay
        self._pasted: dict[str, float] = {}  # pane id -> when its prompt was pasted

    def send(self, pane: PaneRef, text: str) -> None:
        """Paste ``text`` (bracketed when the program asked for it), wait, press Enter.

        A bracketed paste keeps a TUI from submitting at the text's newlines; a
        program that never enabled bracketed paste sees each newline as Enter,
        as it would in a terminal. Enter goes as a separate call after
        :attr:`delay`, so TUIs that debounce pastes see a real key press.

        A paste into a dead pane (its program exited; ``remain-on-exit`` keeps
        the pane) crashes tmux 3.3a's whole server. So the paste, and the Enter,
        only run behind ``if-shell -F '#{pane_dead}'``: tmux evaluates the check
        and runs the chosen branch in one go inside its server, with no event
        (a child's exit) handled in between, so no window is left for a race.
        A dead pane raises :class:`DriverError` with code ``pane_dead``.
        """
        self.paste(pane, text)
        self.submit(pane)

    def paste(self, pane: PaneRef, text: str) -> None:
        """The first call of the two-call rule alone: the text, never Enter (orcr records
        the paste and the Enter as separate steps, so a crash between them is known)."""
        # Paste-end markers inside the text would end the bracket early.
        text = text.replace("\x1b[201~", "").replace("\x1b[200~", "")
        if text:
            buffer = "orcr-" + secrets.token_hex(8)
            try:
                out = self.tmux.run(
                    ["load-buffer", "-b", buffer, "-"],
                    self._unless_dead(
                        pane, f"paste-buffer -d -p -b {buffer} -t {pane.pane_id}", buffer
                    ),
                    input=text.encode("utf-8"),
                )
            except TmuxError:
                self._delete_buffer(buffer)
                raise
            self._raise_if_dead(pane, out, "before its prompt was pasted")
        self._pasted[pane.pane_id] = time.monotonic()

    def submit(self, pane: PaneRef) -> None:
        """The second call: Enter, :attr:`delay` after this driver's paste into
        the pane (at once when it pasted nothing there: the paste was long ago)."""
        pasted = self._pasted.pop(pane.pane_id, None)
        if pasted is not None:
            time.sleep(max(0.0, pasted + self.delay - time.monotonic()))
        out = self.tmux.run(self._unless_dead(pane, f"send-keys -t {pane.pane_id} Enter"))
        self._raise_if_dead(pane, out, "before Enter was pressed on its prompt")

    @staticmethod
    def _unless_dead(pane: PaneRef, command: str, buffer: str | None = None) -> list[str]:
        """``command`` if the pane is alive, else print a marker (and drop ``buffer``).

        Only tmux-generated tokens (``%N`` pane ids, ``orcr-<hex>`` buffer names)
        go into the command strings tmux parses here; never user text."""
        dead = f"display-message -p -t {pane.pane_id} '{DEAD_MARKER} #{{pane_dead_status}}'"
        if buffer is not None:
            dead = f"delete-buffer -b {buffer} ; {dead}"
        want = f"{pane.instance or ''}:{pane.launch_token or ''}"
        if (pane.instance or pane.launch_token) and _MARKS.fullmatch(want):
            # pane ids restart with a new tmux server: the id may name another agent's
            # pane by now, so the text goes only to a pane carrying this agent's marks,
            # checked in the same step (found by the soak, seed 2027)
            have = f"#{{{INSTANCE_OPTION}}}:#{{{TOKEN_OPTION}}}"
            other = f"display-message -p {NOT_MINE_MARKER}"
            if buffer is not None:
                other = f"delete-buffer -b {buffer} ; {other}"
            command = f"if-shell -F -t {pane.pane_id} '#{{==:{have},{want}}}' '{command}' '{other}'"
        return ["if-shell", "-F", "-t", pane.pane_id, "#{pane_dead}", dead, command]

    def _raise_if_dead(self, pane: PaneRef, out: str, when: str) -> None:
        for line in out.splitlines():
            if line.startswith(NOT_MINE_MARKER):
                raise DriverError(
                    f"pane {pane.pane_id} is not this agent's any more (the multiplexer "
                    f"restarted) {when}",
                    code="pane_not_found",
                )
            if line.startswith(DEAD_MARKER):
                code = line[len(DEAD_MARKER) :].strip()
                status = f"status {code}" if code else self._dead_status(pane)
                raise DriverError(
                    f"the program exited ({status}) {when}{self._last_words(pane)}",
                    code="pane_dead",
                )

    def _dead_status(self, pane: PaneRef, longest: float = 15.0) -> str:
        """``status N`` for a pane tmux already calls dead, once tmux knows N.

        tmux 3.3 marks a pane dead when its terminal reads EOF, before it has
        reaped the program (``#{pane_dead_status}`` is empty until then: seen in
        14 of 40 panes polled right away). And a tmux built with libutempter (as
        Debian's is) can miss the program's SIGCHLD altogether and leave it a
        zombie until some other child exits (tmux issues 311, 4559; seen here for
        15 s and more): while the program's process exists, orcr sends the tmux
        server the SIGCHLD it missed and asks again. A program killed by a signal
        never gets a status (tmux 3.3 has no ``#{pane_dead_signal}``): once tmux
        has reaped it, its process is gone and the status still empty."""
        start = time.monotonic()
        while True:
            try:
                out = self.tmux.run(
                    ["display-message", "-p", "-t", pane.pane_id,
                     "#{pane_dead_status}|#{pane_pid}|#{pid}"]
                ).strip()  # fmt: skip
            except DriverError:
                out = ""
            status, program, server = (out.split("|") + ["", ""])[:3]
            if status:
                return f"status {status}"
            if not _exists(program) or time.monotonic() - start >= longest:
                return "killed by a signal, or its status is unknown"
            _nudge(server)
            time.sleep(0.05)

    def _last_words(self, pane: PaneRef) -> str:
        """The dead program's last line of output (``env: 'x': No such file...``)."""
        try:  # -J: a line the pane wrapped comes back whole, not as its last fragment
            screen = self.tmux.run(["capture-pane", "-p", "-J", "-S", "-", "-t", pane.pane_id])
        except DriverError:
            return ""
        lines = [ln.strip() for ln in screen.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("Pane is dead")]
        return f": {tail_words(lines[-1])}" if lines else ""


def _exists(pid: str) -> bool:
    """A process (a zombie too) has this pid: tmux has not reaped it yet."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _nudge(server: str) -> None:
    """Send the tmux server a SIGCHLD: it reaps whatever children have exited."""
    try:
        os.kill(int(server), signal.SIGCHLD)
    except (ValueError, OSError):
        pass
