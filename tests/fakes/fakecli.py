"""What the fake ``claude`` and ``codex`` CLIs share: a small raw-mode TUI and herdr's hook.

Standard library only, so the fakes run under whatever ``python3`` a pane's
PATH finds. The TUI behaves like Claude Code's and Codex's for what orcr
touches:

* raw mode, bracketed paste switched on (``ESC[?2004h``), one composer line;
* a paste is text, never a submit, even when it holds newlines;
* Enter (CR or LF outside a paste) submits the composer, **except** an Enter
  that arrives within :data:`ENTER_GUARD` seconds of a paste's end: both TUIs
  take that as part of the paste burst (TRANSCRIPTS.md sections 1.11 and 2.11)
  and the text stays unsubmitted, so a driver must pause between paste and
  Enter;
* a prompt submitted while a turn runs waits for it (queued);
* Ctrl-C or Ctrl-D with an empty composer quits; a hang-up or SIGTERM quits.

A turn is a list of steps ``(delay, action)``; one ``select`` loop runs them,
so keystrokes keep landing in the composer while a turn works.

Start-up dialogs (:class:`Dialog`, the real CLIs' texts): while one shows, keys
move its menu (up/down) and Enter chooses; typed or pasted text is dropped, so
a prompt typed into a dialog is lost and its Enter chooses the highlighted
option, as in the real TUIs. Like Claude Code 2.1.332's, the first dialog takes
no keys for :data:`DIALOG_DEAF` seconds after it is first drawn (keys sent the
moment it appears are dropped, all of them).

Switches shared by both fakes (set by the subclass from its flags): ``key_log``, a
file that gets one JSON line per Enter the TUI receives, with what it showed then
(``dialog``, ``busy`` for a running turn, else ``idle``; ``composer``: the text it
held; ``dropped``: not acted on), so a test counts the Enters that reached a running
turn or a dialog; ``drop_enters``, how many Enters on a composer holding text are
lost (the text stays unsubmitted), as a TUI that is not ready drops them.

Prompt directives (leading, any order): ``[sleep N]`` delays the answer N
seconds, ``[tool]`` runs one tool call before the answer, ``[ask]`` runs one
that asks permission first (:meth:`Tui.ask`: the turn waits, writing nothing,
until the question is answered in the pane, as the real CLIs do); ``[limit N]`` (Claude
Code) waits out a usage limit first: N seconds of the real CLI's line "Usage limit
reached · continuing automatically at <time> · esc or type to cancel" and nothing written,
then the turn goes on by itself; (Codex) the turn ends errored on its usage-limit error,
"Try again at" a minute past N seconds. ``[planlimit N]`` (Claude Code 2.1.332 logged in
to a claude.ai plan) ends the turn on the plan's limit, then waits N seconds showing
"Continuing automatically at <time> · Esc to cancel" and goes on by itself (Esc cancels
it: :meth:`Tui.escape`). The answer is the
prompt with its directives taken off.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
ENTER_GUARD = 0.15  # seconds after a paste during which Enter is swallowed
DIALOG_DEAF = 0.3  # seconds after a dialog's first draw during which it drops keys
_DIRECTIVE = re.compile(
    r"\s*\[(?:(sleep)\s+(\d+(?:\.\d*)?)|(tool)|(ask)|(limit)\s+(\d+(?:\.\d*)?)"
    r"|(planlimit)\s+(\d+(?:\.\d*)?))\]",
    re.IGNORECASE,
)

Step = tuple[float, Callable[[], None]]


@dataclass
class Plan:
    sleep: float = 0.0
    tool: bool = False
    ask: bool = False  # the tool call asks permission first (a question mid-turn)
    limit: float = 0.0  # seconds the turn waits out a usage limit first (Claude Code only)
    plan_limit: float = 0.0  # seconds it waits after a turn ended on a plan's limit (Claude)
    text: str = ""


def parse_prompt(prompt: str) -> Plan:
    plan, pos = Plan(), 0
    while m := _DIRECTIVE.match(prompt, pos):
        if m.group(1):
            plan.sleep += float(m.group(2))
        elif m.group(3):
            plan.tool = True
        elif m.group(5):
            plan.limit += float(m.group(6))
        elif m.group(7):
            plan.plan_limit += float(m.group(8))
        else:
            plan.ask = True
        pos = m.end()
    plan.text = prompt[pos:].strip()
    return plan


def iso_now() -> str:
    """UTC, millisecond precision, ``Z``: the timestamp both CLIs write."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def uuid7() -> str:
    """A UUIDv7 (48-bit ms time, version 7, variant 10): Codex's thread and turn ids."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


class Jsonl:
    """An append-only transcript, created at the first line (both CLIs create it lazily)."""

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None
        self._held: list[dict] | None = None
        self._lock = threading.Lock()

    @property
    def exists(self) -> bool:
        return self._fd is not None

    def write_nothing_yet(self) -> None:
        """Open an existing transcript to append to (a resumed session)."""
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def hold(self, seconds: float) -> None:
        """Keep what is written for ``seconds``, then write it in order (a TUI that writes
        its transcript late, as Claude Code does on a loaded machine)."""
        with self._lock:
            if self._held is None:
                self._held = []
                timer = threading.Timer(seconds, self._release)
                timer.daemon = True
                timer.start()

    def _release(self) -> None:
        with self._lock:
            held, self._held = self._held or [], None
            for record in held:
                self._write(record)

    def write(self, record: dict) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(record)
            else:
                self._write(record)

    def _write(self, record: dict) -> None:
        if self._fd is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        os.write(self._fd, line)  # one write per line: a reader never sees half a record


def report_session(agent: str, session_id: str, path: str | None, start_source: str) -> bool:
    """herdr's SessionStart hook: ``pane.report_agent_session`` over ``$HERDR_SOCKET_PATH``.

    A no-op unless ``HERDR_ENV=1``, ``HERDR_SOCKET_PATH`` and ``HERDR_PANE_ID``
    are set (the hook's guard). One request per connection, NDJSON, 0.5 s
    timeout, every error ignored: a hook must never break the agent.
    """
    sock_path, pane = os.environ.get("HERDR_SOCKET_PATH"), os.environ.get("HERDR_PANE_ID")
    if os.environ.get("HERDR_ENV") != "1" or not sock_path or not pane:
        return False
    params = {
        "pane_id": pane,
        "source": f"herdr:{agent}",
        "agent": agent,
        "seq": time.time_ns(),
        "agent_session_id": session_id,
        "session_start_source": start_source,
    }
    if path:
        params["agent_session_path"] = path
    request = {"id": f"hook_{time.time_ns()}", "method": "pane.report_agent_session"}
    request["params"] = params
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            s.connect(sock_path)
            s.sendall((json.dumps(request) + "\n").encode())
            s.recv(65536)
    except OSError:
        return False
    return True


@dataclass
class Args:
    """Argv split the way both CLIs do: flags with values, boolean flags, positionals."""

    values: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    positional: list[str] = field(default_factory=list)


def parse_args(argv: list[str], with_value: set[str], aliases: dict[str, str]) -> Args:
    """Unknown flags are taken as booleans (orcr may pass flags the fake does not model)."""
    out = Args()
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            out.positional += argv[i:]
            break
        if not arg.startswith("-") or arg == "-":
            out.positional.append(arg)
            continue
        name, eq, value = arg.partition("=")
        name = aliases.get(name, name)
        if name in with_value:
            if not eq:
                if i >= len(argv):
                    raise SystemExit(f"error: option '{name}' argument missing")
                value = argv[i]
                i += 1
            out.values[name] = value
        else:
            out.flags.add(name)
    return out


@dataclass
class Dialog:
    """A start-up question: text, then a menu whose highlighted option has ``pointer``.

    ``choose(index)`` runs when Enter chooses an option (with no options, Enter
    continues: ``choose(-1)``).
    """

    lines: list[str]
    options: list[str]
    choose: Callable[[int], None]
    selected: int = 0
    pointer: str = "❯"
    indent: str = " "
    footer: list[str] = field(default_factory=lambda: ["Enter to confirm · Esc to cancel"])
    shown_at: float | None = None  # its first draw (monotonic)
    first: bool = False  # the first screen the TUI draws (deaf for DIALOG_DEAF)

    def screen(self) -> list[str]:
        out = list(self.lines)
        for i, text in enumerate(self.options):
            mark = self.pointer if i == self.selected else " "
            out.append(f"{self.indent}{mark} {text}")
        if self.footer:
            out += [""] + [self.indent + f for f in self.footer]
        return out


def post_json(url: str, body: dict, headers: dict[str, str]) -> None:
    """One request to a (fake) model API; its answer is read and dropped, errors ignored."""
    import urllib.request

    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            resp.read()
    except OSError:
        pass


class Tui:
    """The composer, the turn runner and the screen. Subclasses make the turns.

    When a model API is configured (:meth:`model_request`), every turn's start sends
    the conversation so far (each earlier prompt and answer, then this prompt) to it,
    as the real CLIs do: ``tests/fake_models`` records what the model received.
    """

    title = "fake"

    def __init__(self) -> None:
        self.in_fd, self.out_fd = sys.stdin.fileno(), sys.stdout.fileno()
        self.tty = os.isatty(self.in_fd)
        self.composer = ""
        self.pending = b""  # an unfinished escape sequence
        self.paste: bytearray | None = None
        self.paste_ended = 0.0
        self.queue: deque[str] = deque()
        self.steps: deque[Step] = deque()
        self.due = 0.0
        self.busy = False
        self.history: deque[str] = deque(maxlen=40)
        self.quit = False
        self.dirty = True
        self.exit_code = 0
        self.dialogs: deque[Dialog] = deque()
        self.drawn_before = False
        self.paused = False  # a question mid-turn holds the turn's next steps
        self.conversation: list[tuple[str, str]] = []  # (role, text) sent to the model
        #: seconds a finished paste waits before it shows in the composer (real Claude
        #: Code 2.1 draws one 0.2-1.4 s late); a paste arriving meanwhile joins it
        self.paste_delay = 0.0
        self.held_paste = ""
        self.held_until = 0.0
        self.key_log: str | None = None  # one JSON line per Enter received
        self.drop_enters = 0  # Enters on a composer with text that are lost
        #: seconds the TUI leaves its first input unread (a TUI descheduled on a loaded
        #: machine): a paste and the Enter after it are then read at once
        self.input_lag = 0.0

    def log_enter(self, dropped: bool = False) -> None:
        """One line of ``key_log``: an Enter, and what the TUI showed when it came."""
        if not self.key_log:
            return
        shown = "dialog" if self.dialogs else "busy" if self.busy else "idle"
        record = {"t": time.time(), "shown": shown, "composer": self.composer, "dropped": dropped}
        with open(self.key_log, "a") as f:
            f.write(json.dumps(record) + "\n")

    def release_paste(self) -> None:
        if self.held_paste:
            self.composer += self.held_paste
            self.held_paste = ""
            self.dirty = True

    def model_request(self, conversation: list[tuple[str, str]]):
        """``(url, body, headers)`` of the model request for ``conversation``, or None
        (no model API configured)."""
        return None

    def call_model(self, prompt: str) -> None:
        self.conversation.append(("user", prompt))
        request = self.model_request(self.conversation)
        if request is not None:
            post_json(*request)
        self.conversation.append(("assistant", parse_prompt(prompt).text or "ok"))

    # -- turns ---------------------------------------------------------------

    def make_turn(self, prompt: str) -> list[Step]:
        raise NotImplementedError

    def submit(self, prompt: str) -> None:
        if prompt.strip():
            self.queue.append(prompt)
            self.dirty = True

    def escape(self) -> None:
        """Esc pressed at the composer: nothing by default."""

    def ask(self, dialog: Dialog) -> None:
        """A question mid-turn: the turn's next steps wait until ``dialog`` is answered."""
        answer = dialog.choose

        def chosen(index: int) -> None:
            self.paused = False
            self.due = time.monotonic()
            answer(index)

        dialog.choose = chosen
        self.paused = True
        self.dialogs.append(dialog)

    def advance(self) -> None:
        while True:
            if self.paused:
                return
            now = time.monotonic()
            if self.steps:
                if now < self.due:
                    return
                _, action = self.steps.popleft()
                action()
                self.dirty = True
                if self.steps:
                    self.due = now + self.steps[0][0]
                continue
            self.busy = False
            if not self.queue:
                return
            prompt = self.queue.popleft()
            self.call_model(prompt)
            self.history.append(f"> {prompt}")
            self.steps = deque(self.make_turn(prompt))
            self.busy = True
            self.due = now + (self.steps[0][0] if self.steps else 0.0)

    # -- input ---------------------------------------------------------------

    def dialog_feed(self, data: bytes) -> None:
        """Keys while a dialog shows: arrows move, Enter chooses, text is dropped."""
        dialog = self.dialogs[0]
        if dialog.first and (
            dialog.shown_at is None or time.monotonic() - dialog.shown_at < DIALOG_DEAF
        ):
            for _ in range(data.count(b"\r") + data.count(b"\n")):
                self.log_enter(dropped=True)
            return  # the TUI takes no input yet: dropped
        i = 0
        while i < len(data) and self.dialogs and self.dialogs[0] is dialog:
            if data.startswith(PASTE_START, i):
                end = data.find(PASTE_END, i)
                i = len(data) if end < 0 else end + len(PASTE_END)
                continue
            if data[i] == 0x1B:
                seq = data[i : i + 3]
                if seq in (b"\x1b[A", b"\x1bOA"):
                    dialog.selected = max(0, dialog.selected - 1)
                elif seq in (b"\x1b[B", b"\x1bOB"):
                    dialog.selected = min(max(len(dialog.options) - 1, 0), dialog.selected + 1)
                i += self._skip_escape(data, i)
                continue
            if data[i] in (0x0D, 0x0A):
                self.log_enter()
                self.dialogs.popleft()
                dialog.choose(dialog.selected if dialog.options else -1)
            elif data[i] == 0x03:
                self.quit = True
                return
            i += 1
        self.dirty = True

    def feed(self, data: bytes) -> None:
        if self.dialogs:
            self.dialog_feed(data)
            return
        data, self.pending = self.pending + data, b""
        i = 0
        while i < len(data):
            if self.paste is not None:
                end = data.find(PASTE_END, i)
                if end < 0:
                    keep = next(
                        (
                            k
                            for k in range(len(PASTE_END) - 1, 0, -1)
                            if data.endswith(PASTE_END[:k])
                        ),
                        0,
                    )
                    self.paste += data[i : len(data) - keep]
                    self.pending = data[len(data) - keep :]
                    return
                self.paste += data[i:end]
                text = self.paste.decode("utf-8", "replace").replace("\r\n", "\n")
                if self.paste_delay:
                    self.held_paste += text.replace("\r", "\n")
                    self.held_until = time.monotonic() + self.paste_delay
                else:
                    self.composer += text.replace("\r", "\n")
                self.paste = None
                self.paste_ended = time.monotonic()
                i = end + len(PASTE_END)
                continue
            b = data[i]
            if b == 0x1B:
                if data.startswith(PASTE_START, i):
                    self.paste = bytearray()
                    i += len(PASTE_START)
                    continue
                if data[i + 1 : i + 2] not in (b"[", b"O"):
                    self.escape()  # Esc alone (or a paste's start, split: held below)
                if PASTE_START.startswith(data[i:]):
                    self.pending = data[i:]
                    return
                i += self._skip_escape(data, i)
                continue
            if b in (0x0D, 0x0A):
                if time.monotonic() - self.paste_ended < ENTER_GUARD:
                    self.log_enter(dropped=True)  # part of the paste burst: swallowed
                elif self.drop_enters and (self.composer or self.held_paste):
                    self.drop_enters -= 1
                    self.log_enter(dropped=True)  # lost: the text stays unsubmitted
                else:
                    self.log_enter()
                    self.release_paste()
                    self.submit(self.composer)
                    self.composer = ""
            elif b in (0x7F, 0x08):
                self.composer = self.composer[:-1]
            elif b in (0x03, 0x04):
                if not self.composer:
                    self.quit = True
                    return
                self.composer = ""
            elif b >= 0x20:
                j = i
                while j < len(data) and data[j] >= 0x20 and data[j] != 0x7F:
                    j += 1
                self.composer += data[i:j].decode("utf-8", "replace")
                i = j
                continue
            i += 1
        self.dirty = True

    @staticmethod
    def _skip_escape(data: bytes, i: int) -> int:
        if i + 1 < len(data) and data[i + 1] == ord("["):
            for j in range(i + 2, min(len(data), i + 32)):
                if 0x40 <= data[j] <= 0x7E:
                    return j + 1 - i
        return 1

    # -- screen --------------------------------------------------------------

    def write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            try:
                data = data[os.write(self.out_fd, data) :]
            except BlockingIOError:
                select.select([], [self.out_fd], [], 1.0)
            except OSError:
                return

    def screen(self, rows: int) -> list[str]:
        raise NotImplementedError

    def draw(self) -> None:
        if not self.tty or not self.dirty:
            return
        self.dirty = False
        try:
            cols, rows = os.get_terminal_size(self.out_fd)
        except OSError:
            cols, rows = 0, 0
        if cols <= 0 or rows <= 0:
            cols, rows = 80, 24
        if self.dialogs and self.dialogs[0].shown_at is None:
            self.dialogs[0].shown_at = time.monotonic()
            self.dialogs[0].first = not self.drawn_before
        self.drawn_before = True
        shown = self.dialogs[0].screen() if self.dialogs else self.screen(max(rows, 6))
        lines = [ln[: max(cols - 1, 10)] for ln in shown]
        self.write("\x1b[H\x1b[2J" + "\r\n".join(lines))

    # -- main loop -----------------------------------------------------------

    def run(self) -> int:
        saved = None
        if self.tty:
            import termios
            import tty

            saved = termios.tcgetattr(self.in_fd)
            tty.setraw(self.in_fd, termios.TCSANOW)
            self.write("\x1b[?2004h")

        def _stop(signum, frame):
            self.quit = True

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGHUP, _stop)
        try:
            while not self.quit:
                self.advance()
                self.draw()
                # a turn paused on a question waits for keys alone: its past ``due`` made
                # every select return at once (a core spun until the answer)
                waiting = self.steps and not self.paused
                timeout = max(0.0, self.due - time.monotonic()) if waiting else None
                if self.held_paste:
                    if time.monotonic() >= self.held_until:
                        self.release_paste()
                        continue
                    left = self.held_until - time.monotonic()
                    timeout = left if timeout is None else min(timeout, left)
                try:
                    ready, _, _ = select.select([self.in_fd], [], [], timeout)
                except InterruptedError:
                    continue
                if not ready:
                    continue
                if self.input_lag:
                    time.sleep(self.input_lag)
                    self.input_lag = 0.0
                try:
                    data = os.read(self.in_fd, 4096)
                except OSError:
                    break
                if not data:
                    break
                self.feed(data)
        finally:
            self.on_exit()
            if saved is not None:
                import termios

                self.write("\x1b[?2004l\r\n")
                try:
                    termios.tcsetattr(self.in_fd, termios.TCSADRAIN, saved)
                except OSError:
                    pass
        return self.exit_code

    def on_exit(self) -> None:
        pass
