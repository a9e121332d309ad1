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

import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from orcr_core import dirs
from orcr_core.contracts import (
    PARKING,
    DriverError,
    PaneInfo,
    PaneRef,
    SessionPointer,
    StartSpec,
)
from orcr_core.kit.argv import missing_program
from orcr_tmux import control
from orcr_tmux import server as tmux_server
from orcr_tmux.channel import QueryChannel
from orcr_tmux.keys import tmux_key
from orcr_tmux.layout import (
    HEIGHT,
    INSTANCE_OPTION,
    LABEL_OPTION,
    NOT_MINE,
    PARKING_PREFIX,
    PLACEHOLDER_ARGV,
    ROLE_OPTION,
    SESSION_PREFIX,
    TOKEN_OPTION,
    WIDTH,
)
from orcr_tmux.prompt import Prompt
from orcr_tmux.server import TmuxServer
from orcr_tmux.snapshot import Panes
from orcr_tmux.tmuxcli import Tmux, TmuxError, no_format

_MARK = re.compile(r"[A-Za-z0-9_-]+")
#: seconds a workspace session found or made stands for the ``has-session`` that
#: ``ensure_workspace`` would send (a burst of starts asks once, not once per agent)
SEEN_RECENTLY = 0.5
#: tries of a new session while tmux answers that its server exited (it was killed)
EXITING_TRIES = 5


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


class TmuxDriver:
    """orcr's :class:`~orcr_core.contracts.Driver` for tmux >= 3.2, with the optional
    :class:`~orcr_core.contracts.SplitPrompt`, :class:`~orcr_core.contracts.Parking`
    and :class:`~orcr_core.contracts.PaneProcesses`.

    Workspaces, agent windows and parking are here; the rest is in three parts
    held as attributes, each seeing only what it is given: ``_server``
    (:class:`~orcr_tmux.server.TmuxServer`: version, the server last seen and its
    socket), ``_panes`` (:class:`~orcr_tmux.snapshot.Panes`: the listing, over
    ``_server``) and ``_prompt`` (:class:`~orcr_tmux.prompt.Prompt`: typing, over
    :attr:`tmux`). The methods of the contract delegate to them."""

    name = "tmux"

    def __init__(self, config: Any = None):
        get = config.get if config is not None else (lambda key, default=None: default)
        self.tmux = Tmux(
            binary=get("tmux.binary", "tmux") or "tmux",
            socket=get("tmux.socket", "") or dirs.mux_name(),
        )
        self._server = TmuxServer(self.tmux)
        self._channel = QueryChannel(self.tmux)  # screen reads, pids: one client
        self._panes = Panes(self._server, self._channel.query)
        self._prompt = Prompt(self.tmux, delay=0.3)
        self._seen: dict[str, float] = {}  # workspace session -> when found or made
        self._started: dict[str, int] = {}  # a pane start() just made -> its program's pid

    @property
    def prompt_delay(self) -> float:
        """Pause between the prompt text and its Enter (the two-call rule)."""
        return self._prompt.delay

    @prompt_delay.setter
    def prompt_delay(self, seconds: float) -> None:
        self._prompt.delay = seconds

    # -- the server -----------------------------------------------------------------------

    @classmethod
    def available(cls, config: Any = None) -> tuple[bool, str]:
        """Whether tmux >= 3.2 (``[tmux] binary``) is on PATH (for ``[driver] name = "auto"``)."""
        return tmux_server.available(config)

    def handshake(self) -> dict[str, Any]:
        return self._server.handshake()

    def ensure_session(self) -> None:
        """Check tmux is usable (:meth:`TmuxServer.ensure_usable`); the server itself
        starts with the first workspace."""
        self._server.ensure_usable()

    # -- workspaces and agents ------------------------------------------------------------

    def ensure_workspace(self, level1: str) -> str:
        name = SESSION_PREFIX + level1
        if time.monotonic() - self._seen.get(name, float("-inf")) < SEEN_RECENTLY:
            return name
        self._ensure_session(name, "@orcr_workspace", level1)
        self._seen[name] = time.monotonic()
        return name

    def _ensure_session(self, name: str, option: str, value: str) -> str:
        """The session ``name``, created with its placeholder window when missing."""
        target = "=" + name
        try:
            self.tmux.run(["has-session", "-t", target])
            return name
        except TmuxError as exc:
            # classify() reads "no current target" (a server another thread's new-session
            # just started, no session in it yet) as not_found
            if exc.code not in ("not_found", "server_not_running"):
                raise
        for attempt in range(EXITING_TRIES):
            try:
                self.tmux.run(
                    ["new-session", "-d", "-s", name, "-n", "orcr", "-c", "/", "-x", WIDTH,
                     "-y", HEIGHT, "--", *PLACEHOLDER_ARGV],
                    ["set-option", "-t", target + ":", option, value],
                    ["set-option", "-p", "-t", target + ":", ROLE_OPTION, "placeholder"],
                )  # fmt: skip
                return name
            except TmuxError as exc:
                if "duplicate session" in str(exc):
                    return name
                if exc.code != "server_not_running" or attempt == EXITING_TRIES - 1:
                    raise
                # a server still exiting (killed a moment ago) answered "server exited
                # unexpectedly": the next client starts a new one
                time.sleep(0.1)
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
        marks = [
            ["set-option", "-p", "-t", window, option, value]
            for option, value in (
                (INSTANCE_OPTION, spec.instance),
                (TOKEN_OPTION, spec.launch_token),
            )
            if value
        ]
        try:
            out = self._new_window(spec, session, window, token, marks)
        except DriverError as exc:
            vouched = self._seen.pop(spec.workspace_id, None) is not None
            if exc.code != "workspace_not_found" or not vouched:
                raise
            # a workspace ensure_workspace found or made went since (its has-session
            # skipped within SEEN_RECENTLY): made again, once, as has-session would have
            self.ensure_workspace(spec.workspace_id[len(SESSION_PREFIX) :])
            out = self._new_window(spec, session, window, token, marks)
        window_id, pane_id, pid = out.split()[:3]
        if len(self._started) > 256:
            self._started.clear()  # starts whose program's pid nobody asked for
        self._started[pane_id] = int(pid)
        return PaneRef(workspace_id=spec.workspace_id, tab_id=window_id, pane_id=pane_id)

    def _new_window(self, spec: StartSpec, session: str, window: str, token: str, marks) -> str:
        """The window of :meth:`start`, labelled and marked in one command group: its
        ``window_id pane_id pane_pid``."""
        env_args = [a for k, v in spec.env.items() for a in ("-e", f"{k}={v}")]
        try:
            return self.tmux.run(
                ["new-window", "-d", "-P", "-F", "#{window_id} #{pane_id} #{pane_pid}", "-t", session + ":",
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
                return exc.output
            if exc.code in ("not_found", "server_not_running"):
                raise DriverError(
                    f"workspace {spec.workspace_id!r} not found: {exc}", code="workspace_not_found"
                ) from exc
            raise

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
        """The text, :attr:`prompt_delay`, then Enter, guarded against a dead pane
        and a pane without the agent's marks (:meth:`Prompt.send`)."""
        self._prompt.send(pane, text)

    def paste_prompt(self, pane: PaneRef, text: str) -> None:
        """The first call of the two-call rule alone: the text, never Enter."""
        self._prompt.paste(pane, text)

    def submit_prompt(self, pane: PaneRef) -> None:
        """The second call: Enter, :attr:`prompt_delay` after this driver's paste."""
        self._prompt.submit(pane)

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
        return self._channel.query(["capture-pane", "-p", "-t", pane.pane_id])

    def session_pointer(self, pane: PaneRef) -> SessionPointer | None:
        """tmux knows nothing about agent sessions."""
        return None

    def agent_status(self, pane: PaneRef) -> str | None:
        """tmux has no agent detection; working/idle come from transcripts."""
        return None

    # -- state ----------------------------------------------------------------------------

    def snapshot(self) -> list[PaneInfo]:
        """Every live pane but the workspace placeholders (:meth:`Panes.snapshot`);
        a server whose socket file is gone raises (retryable), never "no panes"."""
        return self._panes.snapshot(self.parking_session())

    def pane_pid(self, pane: PaneRef) -> int | None:
        """The pid of the pane's process (``#{pane_pid}``); None when the pane is gone."""
        return self._panes.pane_pid(pane)

    def program_pid(self, pane: PaneRef) -> int | None:
        """The agent's program itself: tmux runs the argv in the pane with no shell. The
        first ask for a pane :meth:`start` just made is answered from its ``new-window``
        (one tmux client fewer per start); every later one asks tmux."""
        pid = self._started.pop(pane.pane_id, None)
        return pid if pid is not None else self._panes.pane_pid(pane)

    def events(
        self,
        stop: threading.Event | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> Iterator[dict]:
        """tmux's own pane events from control-mode clients (:mod:`orcr_tmux.control`)."""
        return control.events(self.tmux, stop=stop, on_start=on_start)

    # -- for ``orcr agent attach`` --------------------------------------------------------

    def focus(self, pane: PaneRef) -> None:
        """Make the pane the current one of its session, so an attach lands on it."""
        self.tmux.run(["select-window", "-t", pane.pane_id], ["select-pane", "-t", pane.pane_id])

    def attach_command(self, pane: PaneRef) -> list[str]:
        """The argv a user runs in a terminal to watch the pane."""
        return self.tmux.attach_argv(pane.pane_id)
