"""The tmux driver: orcr's multiplexer contract over tmux's command line.

Layout on orcr's own tmux server (``tmux -L orcr``, or ``-L orcr-<instance id>``
under ``ORCR_HOME``):

* one tmux **session per level-1 path segment**, named ``orcr-<level1>``
  (segments are ``[a-z0-9_]+``, so names never contain the ``.``/``:`` tmux
  rewrites and never collide). The name is the workspace id and the only key:
  it is found again with an exact-name lookup after any orcr or tmux restart,
  never through a remembered ``$N`` id. Two threads creating the same session
  race safely: tmux refuses the second ``new-session`` as a duplicate.
* each session keeps a **placeholder window** running ``sleep`` (tagged with
  pane option ``@orcr_role=placeholder``, left out of :meth:`snapshot`).
  tmux cannot hold a session with no window, and without the placeholder the
  session would vanish with its last agent, racing a concurrent ``start``.
* one **window per agent**, its single pane tagged with pane options
  ``@orcr_path=<label>``, ``@orcr_instance`` and ``@orcr_token`` (the marks orcr
  matches and closes panes by) and the window named after the label (for humans).
* a **parking session** ``orcr-parked-<instance id>`` (with its own placeholder),
  created on the first park: :meth:`TmuxDriver.move` moves an idle agent's window
  there and back (``move-window``; ids, process and marks unchanged).

Server lifetime: tmux's default ``exit-empty on`` is kept. The server starts
with the first session and the placeholders keep it up while any workspace
exists; once every session is gone no agent runs, so an empty server would be
a useless leftover, and the next :meth:`ensure_workspace` starts a fresh one.
Agents inherit the environment of the process that started the tmux server
(tmux's global environment), with ``StartSpec.env`` on top and ``PATH`` from
the current orcr process (tmux takes a new pane's PATH from its client).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import threading
import time
from typing import Any

from orcr_core import dirs
from orcr_core.argv import missing_program
from orcr_core.contracts import (
    PARKING,
    DriverError,
    PaneInfo,
    PaneRef,
    SessionPointer,
    StartSpec,
)
from orcr_tmux.keys import tmux_key
from orcr_tmux.tmuxcli import INSTALL_HINT, Tmux, TmuxError, no_format, version_ok

SESSION_PREFIX = "orcr-"
#: The parking session is ``orcr-parked-<instance id>``: the ``-`` after
#: ``parked`` never occurs in a level-1 segment, so it cannot be a workspace.
PARKING_PREFIX = "orcr-parked-"
NOT_MINE = "orcr-not-mine"
LABEL_OPTION = "@orcr_path"
ROLE_OPTION = "@orcr_role"
INSTANCE_OPTION = "@orcr_instance"
TOKEN_OPTION = "@orcr_token"
PLACEHOLDER_ARGV = ("sleep", "2147483647")  # ~68 years; no "infinity" on BSD sleep
#: Detached windows get this size (tmux's own default is 80x24, cramped for TUIs);
#: an attaching client resizes them to its terminal.
WIDTH, HEIGHT = "200", "50"
#: What the dead-pane branch of a guarded paste prints (see ``send_prompt``).
DEAD_MARKER = "orcr-pane-dead"
_FIELDS = (
    "#{pid}",  # the tmux server's
    "#{pane_id}",
    "#{window_id}",
    "#{session_name}",
    "#{pane_dead}",
    f"#{{{ROLE_OPTION}}}",
    f"#{{{INSTANCE_OPTION}}}",
    f"#{{{TOKEN_OPTION}}}",
    "#{pane_pid}",
    f"#{{{LABEL_OPTION}}}",
)
_MARK = re.compile(r"[A-Za-z0-9_-]+")


def _session_target(workspace_id: str) -> str:
    """A tmux target for a workspace id: ``$N`` as is, a name matched exactly."""
    return workspace_id if workspace_id.startswith("$") else "=" + workspace_id


def safe_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """An argv tmux will exec directly.

    Given exactly one command argument tmux runs it as ``sh -c ARG``, so a
    program path with spaces, ``;`` or ``$`` would be shell-interpreted. A
    one-element argv is therefore prefixed with ``env --`` (which execs it
    with no shell), or ``nice -n 0 --`` when the program name holds ``=``
    (``env`` would read that as a variable assignment).
    """
    argv = list(argv)
    if len(argv) != 1:
        return argv
    return ["nice", "-n", "0", "--", *argv] if "=" in argv[0] else ["env", "--", *argv]


def _tmux_server_alive(pid: int) -> bool:
    """Whether ``pid`` is a live tmux server (``/proc`` names it; elsewhere any live pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours: the pid was reused
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().startswith("tmux")
    except OSError:
        return True


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


class TmuxDriver:
    """orcr's :class:`~orcr_core.contracts.Driver` for tmux >= 3.2."""

    name = "tmux"
    #: Pause between the prompt text and its Enter (the two-call rule).
    prompt_delay = 0.3

    def __init__(self, config: Any = None):
        get = config.get if config is not None else (lambda key, default=None: default)
        self.tmux = Tmux(
            binary=get("tmux.binary", "tmux") or "tmux",
            socket=get("tmux.socket", "") or dirs.mux_name(),
        )
        self._version: str | None = None
        self._server_pid: int | None = None  # the tmux server last seen answering
        self._lock = threading.Lock()
        self._pasted: dict[str, float] = {}  # pane id -> when its prompt was pasted

    # -- availability and version ---------------------------------------------------------

    @classmethod
    def available(cls, config: Any = None) -> tuple[bool, str]:
        """Whether tmux >= 3.2 (``[tmux] binary``) is on PATH (for ``[driver] name = "auto"``)."""
        binary = str(config.get("tmux.binary") or "tmux") if config is not None else "tmux"
        path = shutil.which(binary)
        if path is None:
            return False, f"{binary} not found on PATH; {INSTALL_HINT}"
        try:
            text = Tmux(binary=path).version()
        except DriverError as exc:
            return False, str(exc)
        if not version_ok(text):
            return False, f"{text} at {path} is too old; {INSTALL_HINT}"
        return True, f"{text} at {path}"

    def handshake(self) -> dict[str, Any]:
        text = self.tmux.version()
        if not version_ok(text):
            raise DriverError(
                f"{text} is not supported: orcr needs tmux >= 3.2; {INSTALL_HINT}",
                code="unsupported_version",
            )
        with self._lock:
            self._version = text.removeprefix("tmux ").strip()
        return {"version": self._version, "protocol": None, "socket": self.tmux.socket}

    def ensure_session(self) -> None:
        """Check tmux is usable. The server itself starts with the first workspace;
        a socket path whose directory is gone is an outage (retryable)."""
        if self._version is None:
            self.handshake()
        self.tmux.check_socket_dir()
        pid, sock = self._server_pid, self.tmux.socket
        if pid and "/" in sock and not os.path.exists(sock) and _tmux_server_alive(pid):
            # its directory is back, its socket not yet: never start a second server there
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR1)
            raise DriverError(
                f"the tmux server (pid {pid}) runs but its socket {sock} is gone; asked it "
                "to recreate its socket",
                code="tmux_socket_gone",
                retryable=True,
            )

    # -- workspaces and agents ------------------------------------------------------------

    def ensure_workspace(self, level1: str) -> str:
        return self._ensure_session(SESSION_PREFIX + level1, "@orcr_workspace", level1)

    def _ensure_session(self, name: str, option: str, value: str) -> str:
        """The session ``name``, created with its placeholder window when missing."""
        target = "=" + name
        try:
            self.tmux.run(["has-session", "-t", target])
            return name
        except TmuxError as exc:
            if exc.code not in ("not_found", "server_not_running"):
                raise
        try:
            self.tmux.run(
                ["new-session", "-d", "-s", name, "-n", "orcr", "-c", "/", "-x", WIDTH, "-y", HEIGHT,
                 "--", *PLACEHOLDER_ARGV],
                ["set-option", "-t", target + ":", option, value],
                ["set-option", "-p", "-t", target + ":", ROLE_OPTION, "placeholder"],
            )  # fmt: skip
        except TmuxError as exc:
            if "duplicate session" not in str(exc):
                raise
        return name

    def start(self, spec: StartSpec) -> PaneRef:
        """Start ``spec.argv`` in a new window of the workspace, labelled atomically.

        One tmux invocation creates the window under a unique temporary name and,
        in the same command group, sets ``@orcr_path``, the marks
        ``@orcr_instance`` and ``@orcr_token`` (``spec.instance``,
        ``spec.launch_token``), ``remain-on-exit on``
        and the final window name through that temporary name. tmux runs the
        group back to back inside its server, so no crash of orcr can leave an
        unlabelled agent pane behind. ``ORCR_PATH`` in the pane env carries the
        label as well.

        The pane's ``PATH`` is the one of the tmux client process, which tmux
        lets override ``-e PATH=``: a ``PATH`` in ``spec.env`` is therefore
        given to the client as well.
        """
        if not spec.argv:
            raise DriverError("empty argv", code="bad_spec")
        if not os.path.isdir(spec.cwd):
            # tmux silently falls back to another directory for a missing -c.
            raise DriverError(
                f"working directory {spec.cwd!r} does not exist", code="cwd_not_found"
            )
        for key in spec.env:
            if not key or "=" in key or "\0" in key:
                raise DriverError(f"bad environment variable name {key!r}", code="bad_spec")
        self._check_program(spec)
        session = _session_target(spec.workspace_id)
        token = "orcr-new-" + secrets.token_hex(8)
        window = f"{session}:={token}"
        env_args = [a for k, v in spec.env.items() for a in ("-e", f"{k}={v}")]
        marks = [
            ["set-option", "-p", "-t", window, option, value]
            for option, value in (
                (INSTANCE_OPTION, spec.instance),
                (TOKEN_OPTION, spec.launch_token),
            )
            if value
        ]
        try:
            out = self.tmux.run(
                ["new-window", "-d", "-P", "-F", "#{window_id} #{pane_id}", "-t", session + ":",
                 "-n", token, "-c", no_format(spec.cwd), *env_args, "--", *safe_argv(spec.argv)],
                ["set-option", "-p", "-t", window, LABEL_OPTION, spec.label],
                *marks,
                # a finished agent leaves a dead pane: snapshot() reports it
                # dead, orcr ends the agent ``exited`` and closes the pane
                ["set-option", "-w", "-t", window, "remain-on-exit", "on"],
                ["set-option", "-w", "-t", window, "allow-rename", "off"],
                ["rename-window", "-t", window, no_format(spec.label)],
                path=spec.env.get("PATH"),
            )  # fmt: skip
        except TmuxError as exc:
            if exc.output.strip() and exc.code == "not_found":
                # The window was made, but its program exited before tmux got to
                # the options: report the pane; it is already gone.
                out = exc.output
            elif exc.code in ("not_found", "server_not_running"):
                raise DriverError(
                    f"workspace {spec.workspace_id!r} not found: {exc}", code="workspace_not_found"
                ) from exc
            else:
                raise
        window_id, pane_id = out.split()[:2]
        return PaneRef(workspace_id=spec.workspace_id, tab_id=window_id, pane_id=pane_id)

    def _check_program(self, spec: StartSpec) -> None:
        """Refuse a program not on PATH up front: tmux would start it, the exec
        would fail and the pane would die with no error to show. The program is
        the one the argv really runs, behind ``env -u VAR --`` (how Claude Code
        and Codex are started) or ``nice`` prefixes."""
        why = missing_program(spec.argv, spec.env, spec.cwd)
        if why is not None:
            raise DriverError(why, code="command_not_found")

    def close(self, pane: PaneRef) -> None:
        """``kill-pane``; with marks on ``pane``, only if the pane carries them.

        The mark check runs in the tmux server, in the same step as the kill
        (``if-shell -F``), so a pane id that now names another instance's pane
        (pane ids restart with a new tmux server) is never closed.
        """
        command = ["kill-pane", "-t", pane.pane_id]
        if pane.instance is not None or pane.launch_token is not None:
            want = f"{pane.instance or ''}:{pane.launch_token or ''}"
            if not _MARK.fullmatch(want.replace(":", "_")):
                return  # marks orcr never writes: no pane can carry them
            have = f"#{{{INSTANCE_OPTION}}}:#{{{TOKEN_OPTION}}}"
            command = [
                "if-shell", "-F", "-t", pane.pane_id, f"#{{==:{have},{want}}}",
                f"kill-pane -t {pane.pane_id}",
            ]  # fmt: skip
        try:
            self.tmux.run(command)
        except TmuxError as exc:
            if exc.code not in ("not_found", "server_not_running"):
                raise

    # -- park and un-park ------------------------------------------------------------------

    @staticmethod
    def parking_session() -> str:
        return PARKING_PREFIX + dirs.instance_id()

    def move(self, pane: PaneRef, dest: str) -> PaneRef:
        """``move-window`` the agent's window (its one pane) to the parking session
        (``dest`` :data:`PARKING`) or back to a workspace session.

        The window keeps its id, its pane, process, options and marks. The mark
        check runs in the tmux server in the same step as the move (``if-shell
        -F``, as :meth:`close`), so a pane id naming another instance's pane is
        never moved."""
        session = self.parking_session() if dest == PARKING else dest
        if dest == PARKING:
            self._ensure_session(session, "@orcr_parking", dirs.instance_id())
        move = f"move-window -d -s {pane.pane_id} -t ={session}:"
        if not _MARK.fullmatch(session):
            raise DriverError(f"bad destination session {session!r}", code="bad_spec")
        commands = [move.split()]
        if pane.instance is not None or pane.launch_token is not None:
            want = f"{pane.instance or ''}:{pane.launch_token or ''}"
            if not _MARK.fullmatch(want.replace(":", "_")):
                raise DriverError(f"pane {pane.pane_id} is not this agent's", code="pane_not_found")
            have = f"#{{{INSTANCE_OPTION}}}:#{{{TOKEN_OPTION}}}"
            commands = [
                ["if-shell", "-F", "-t", pane.pane_id, f"#{{==:{have},{want}}}", move,
                 f"display-message -p {NOT_MINE}"],
            ]  # fmt: skip
        where = ["display-message", "-p", "-t", pane.pane_id, "#{window_id} #{session_name}"]
        try:
            out = self.tmux.run(*commands, where)
        except TmuxError as exc:
            if exc.code in ("not_found", "server_not_running"):
                raise DriverError(
                    f"pane {pane.pane_id} not found: {exc}", code="pane_not_found"
                ) from exc
            raise
        lines = out.split()
        if NOT_MINE in lines:
            raise DriverError(f"pane {pane.pane_id} is not this agent's", code="pane_not_found")
        window_id, now_in = lines[-2:]
        if now_in != session:
            raise DriverError(f"pane {pane.pane_id} did not move to {session}", code="move_failed")
        return PaneRef(workspace_id=session, tab_id=window_id, pane_id=pane.pane_id)

    # -- input and output -----------------------------------------------------------------

    def send_prompt(self, pane: PaneRef, text: str) -> None:
        """Paste ``text`` (bracketed when the program asked for it), wait, press Enter.

        A bracketed paste keeps a TUI from submitting at the text's newlines; a
        program that never enabled bracketed paste sees each newline as Enter,
        as it would in a terminal. Enter goes as a separate call after
        :attr:`prompt_delay`, so TUIs that debounce pastes see a real key press.

        A paste into a dead pane (its program exited; ``remain-on-exit`` keeps
        the pane) crashes tmux 3.3a's whole server. So the paste, and the Enter,
        only run behind ``if-shell -F '#{pane_dead}'``: tmux evaluates the check
        and runs the chosen branch in one go inside its server, with no event
        (a child's exit) handled in between, so no window is left for a race.
        A dead pane raises :class:`DriverError` with code ``pane_dead``.
        """
        self.paste_prompt(pane, text)
        self.submit_prompt(pane)

    def paste_prompt(self, pane: PaneRef, text: str) -> None:
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

    def submit_prompt(self, pane: PaneRef) -> None:
        """The second call: Enter, :attr:`prompt_delay` after this driver's paste into
        the pane (at once when it pasted nothing there: the paste was long ago)."""
        pasted = self._pasted.pop(pane.pane_id, None)
        if pasted is not None:
            time.sleep(max(0.0, pasted + self.prompt_delay - time.monotonic()))
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
        return ["if-shell", "-F", "-t", pane.pane_id, "#{pane_dead}", dead, command]

    def _raise_if_dead(self, pane: PaneRef, out: str, when: str) -> None:
        for line in out.splitlines():
            if line.startswith(DEAD_MARKER):
                code = line[len(DEAD_MARKER) :].strip()
                status = f"status {code}" if code else self._dead_status(pane)
                raise DriverError(
                    f"the program exited ({status}) {when}{self._last_words(pane)}",
                    code="pane_dead",
                )

    def _dead_status(self, pane: PaneRef, within: float = 1.0) -> str:
        """``status N`` for a pane tmux already calls dead, once tmux knows N.

        tmux 3.3 marks a pane dead when its terminal reads EOF, which can come
        a moment before it has reaped the program (``#{pane_dead_status}`` is
        empty until then: seen in 14 of 40 panes polled right away). So wait
        for the status, briefly. A program killed by a signal never gets one
        (tmux 3.3 has no ``#{pane_dead_signal}``)."""
        deadline = time.monotonic() + within
        while True:
            try:
                out = self.tmux.run(
                    ["display-message", "-p", "-t", pane.pane_id, "#{pane_dead_status}"]
                ).strip()
            except DriverError:
                out = ""
            if out:
                return f"status {out}"
            if time.monotonic() >= deadline:
                return "killed by a signal, or its status is unknown"
            time.sleep(0.02)

    def _last_words(self, pane: PaneRef) -> str:
        """The dead program's last line of output (``env: 'x': No such file...``)."""
        try:  # -J: a line the pane wrapped comes back whole, not as its last fragment
            screen = self.tmux.run(["capture-pane", "-p", "-J", "-S", "-", "-t", pane.pane_id])
        except DriverError:
            return ""
        lines = [ln.strip() for ln in screen.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("Pane is dead")]
        return f": {tail_words(lines[-1])}" if lines else ""

    def send_keys(self, pane: PaneRef, keys: list[str]) -> None:
        commands = []
        for key in keys:
            literal, value = tmux_key(key)
            commands.append(
                ["send-keys", *(["-l"] if literal else []), "-t", pane.pane_id, "--", value]
            )
        if commands:
            self.tmux.run(*commands)

    def read(self, pane: PaneRef) -> str:
        return self.tmux.run(["capture-pane", "-p", "-t", pane.pane_id])

    # -- state ----------------------------------------------------------------------------

    def snapshot(self) -> list[PaneInfo]:
        """Every live pane on orcr's tmux server but the workspace placeholders.

        No server means no panes (tmux's panes die with their server): an empty
        list. But a server that still runs while its socket file is gone (a /tmp
        cleaner deleted it) is an outage, not "no panes": the driver remembers the
        server's pid, asks it to recreate its socket (``SIGUSR1``) and raises a
        retryable error, so no agent is taken for lost. A dead pane (its
        program exited; agent windows keep ``remain-on-exit on``) is reported
        with ``dead=True`` so orcr ends its agent ``exited`` and closes it.
        """
        try:
            out = self.tmux.run(["list-panes", "-a", "-F", "\t".join(_FIELDS)])
        except TmuxError as exc:
            if exc.code == "server_not_running":
                self._socket_gone_or_none(exc)
                return []
            raise
        panes = []
        parking = self.parking_session()
        for line in out.splitlines():
            parts = line.split("\t", len(_FIELDS) - 1)
            if len(parts) != len(_FIELDS):
                continue
            server_pid, pane_id, window_id, session, dead, role, instance, token, pid, label = parts
            self._server_pid = int(server_pid) if server_pid.isdigit() else self._server_pid
            if role == "placeholder":
                continue
            panes.append(
                PaneInfo(
                    pane_id=pane_id,
                    workspace_id=session,
                    tab_id=window_id,
                    label=label or None,
                    session=self.tmux.socket,
                    dead=dead == "1",
                    instance=instance or None,
                    launch_token=token or None,
                    pid=int(pid) if pid.isdigit() else None,
                    parked=session == parking,
                )
            )
        return panes

    def pane_pid(self, pane: PaneRef) -> int | None:
        """The pid of the pane's process (``#{pane_pid}``); None when the pane is gone."""
        try:
            out = self.tmux.run(["display-message", "-p", "-t", pane.pane_id, "#{pane_pid}"])
        except TmuxError as exc:
            if exc.code in ("not_found", "server_not_running"):
                return None
            raise
        out = out.strip()
        return int(out) if out.isdigit() else None

    def _socket_gone_or_none(self, exc: TmuxError) -> None:
        """Raise (retryable) when the tmux server last seen still runs: its socket
        is gone, not its panes. Return when there is no such server."""
        pid = self._server_pid
        # a socket file still there but refusing belongs to a server that exited
        # (or is exiting: kill-server); only a missing socket file can hide a live one
        gone = "No such file or directory" in str(exc)
        if pid is None or not gone or not _tmux_server_alive(pid):
            return
        try:
            os.kill(pid, signal.SIGUSR1)  # tmux recreates its socket on SIGUSR1
        except OSError:
            pass
        raise DriverError(
            f"the tmux server (pid {pid}) runs but its socket {self.tmux.socket} is gone "
            f"({exc}); asked it to recreate its socket",
            code="tmux_socket_gone",
            retryable=True,
        ) from exc

    def session_pointer(self, pane: PaneRef) -> SessionPointer | None:
        """tmux knows nothing about agent sessions."""
        return None

    def agent_status(self, pane: PaneRef) -> str | None:
        """tmux has no agent detection; working/idle come from transcripts."""
        return None

    def events(self, stop=None, on_start=None):
        """tmux's own pane events from control-mode clients (:mod:`orcr_tmux.control`)."""
        from orcr_tmux import control

        return control.events(self, stop=stop, on_start=on_start)

    # -- for ``orcr agent attach`` --------------------------------------------------------

    def focus(self, pane: PaneRef) -> None:
        """Make the pane the current one of its session, so an attach lands on it."""
        self.tmux.run(["select-window", "-t", pane.pane_id], ["select-pane", "-t", pane.pane_id])

    def attach_command(self, pane: PaneRef) -> list[str]:
        """The argv a user runs in a terminal to watch the pane."""
        return self.tmux.attach_argv(pane.pane_id)
