"""The herdr driver: orcr's agents run in panes of orcr's own herdr session.

Recovery anchor: every agent pane carries the agent's full path as its herdr
pane label, and every top-level path segment is a workspace labelled with it.
Both survive a herdr restart (ids too, but terminal ids do not), so the driver
never remembers an id across calls: it asks herdr (``workspace.list``,
``session.snapshot``) and matches labels.

Marks: the orcr instance id and the row's launch token ride on the agent's own
tab label (:func:`orcr_herdr.marks.tab_label`); :meth:`HerdrDriver.snapshot`
reports them and a :meth:`HerdrDriver.close` that names marks closes only a
pane carrying them.

Versions: herdr 0.8 (socket protocols 19, 20) and 0.9 (22); what differs is
asked of :attr:`HerdrDriver.protocol` where it matters (:mod:`orcr_herdr.versions`).
On 0.9 orcr tells herdr how to resume each agent (``resume_argv``, :mod:`orcr_herdr.native`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from orcr_core import dirs
from orcr_core.contracts import (
    PARKING,
    DriverError,
    PaneInfo,
    PaneRef,
    SessionPointer,
    StartSpec,
    UnmanagedAgent,
)
from orcr_core.kit.argv import missing_program
from orcr_herdr import discover as discovery
from orcr_herdr import server
from orcr_herdr.client import HerdrClient
from orcr_herdr.marks import PARKING_PREFIX, parse_marks, pointer, tab_label
from orcr_herdr.native import ResumeReports
from orcr_herdr.paths import session_socket
from orcr_herdr.versions import REQUIRED_VERSION, SUPPORTED_PROTOCOLS, check_pong

__all__ = ["HERDR_CONFIG", "SUPPORTED_PROTOCOLS", "HerdrDriver", "tab_label"]

HERDR_CONFIG = server.HERDR_CONFIG
SUBMIT_DELAY = 0.3  # herdr's own AGENT_PROMPT_SUBMIT_DELAY
START_TIMEOUT = 15.0
#: seconds: a herdr reply this recent stands for the ping ``ensure_session`` sends
ANSWERED_RECENTLY = 0.5
DEFAULT_SUBSCRIPTIONS = [
    {"type": t}
    for t in (
        "pane.created",
        "pane.closed",
        "pane.exited",
        "pane.updated",
        "pane.agent_detected",
        "tab.closed",
        "workspace.closed",
    )
]


def _first_pane_id(node: dict) -> str:
    if node.get("type") == "split":
        return _first_pane_id(node["first"])
    return node["pane_id"]


class HerdrDriver:
    """:class:`orcr_core.contracts.Driver` over herdr's socket API, with every optional
    capability; :class:`~orcr_core.contracts.NativeResume` (and the process info behind
    :meth:`pane_pid`) through its ``_resume`` part (:class:`~orcr_herdr.native.ResumeReports`)."""

    name = "herdr"

    def __init__(self, config: Any, *, submit_delay: float = SUBMIT_DELAY):
        self.config = config
        self.session = str(config.get("herdr.session") or dirs.mux_name())
        self.binary = str(config.get("herdr.binary") or "herdr")
        explicit = str(config.get("herdr.socket") or "")
        self.owns_server = not explicit  # an explicit socket is someone else's server
        self.socket_path = explicit or str(session_socket(self.session))
        self.submit_delay = max(submit_delay, SUBMIT_DELAY)
        self._pasted: dict[str, float] = {}  # pane id -> when its prompt was pasted
        self.client = HerdrClient(self.socket_path)
        self._session_lock = threading.Lock()
        self._workspace_lock = threading.Lock()
        self._bootstrap: dict[str, str] = {}  # workspace id -> its creation shell pane
        self._server: subprocess.Popen | None = None
        self.protocol: int | None = None  # herdr's, once a handshake saw it
        self._resume = ResumeReports(self.client, lambda: self.protocol)

    # ------------------------------------------------------------ availability
    @classmethod
    def available(cls, config: Any = None) -> tuple[bool, str]:
        """Whether the herdr binary (``herdr.binary``) is on PATH (:func:`server.available`)."""
        return server.available(config)

    # ------------------------------------------------------------ server
    def request(self, method: str, params: dict | None = None) -> dict:
        return self.client.request(method, params)

    def handshake(self) -> dict[str, Any]:
        """``ping``: herdr's version, protocol (19, 20 or 22) and capabilities;
        :class:`DriverError` ``unsupported_herdr_protocol`` for any other protocol."""
        facts = check_pong(self.client.request("ping", {}), self.socket_path, self.session)
        self.protocol = facts["protocol"]
        return {**facts, "socket": self.socket_path, "session": self.session}

    def _answers(self) -> bool:
        """A reply within ``ANSWERED_RECENTLY`` (the last step's snapshot), else a
        ``ping``: every step and promotion asks, and a ping is a connection of its own."""
        if time.monotonic() - self.client.answered_at < ANSWERED_RECENTLY:
            return True
        try:
            self.client.request("ping", {}, attempts=1)
            return True
        except DriverError as exc:
            if exc.retryable:
                return False
            raise

    def herdr_config_path(self) -> Path:
        return Path(self.config.data_dir) / "herdr-config.toml"

    def ensure_session(self) -> None:
        """Start ``herdr --session <name> server`` detached unless it already answers
        (a background server per session, from a clean environment: :mod:`orcr_herdr.server`)."""
        with self._session_lock:
            if self._answers():
                return
            if not self.owns_server:
                raise DriverError(
                    f"herdr is not running at {self.socket_path} (herdr.socket is set, so "
                    "orcr does not start a server there)",
                    code="herdr_unavailable",
                    retryable=True,
                )
            binary = shutil.which(self.binary)
            if binary is None:
                raise DriverError(
                    f"herdr binary {self.binary!r} not found on PATH; orcr needs {REQUIRED_VERSION}",
                    code="herdr_not_found",
                )
            env = server.clean_env(os.environ)
            env["HERDR_CONFIG_PATH"] = str(server.write_config(self.herdr_config_path()))
            proc = subprocess.Popen(
                server.server_argv(binary, self.session),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
            self._server = proc
            threading.Thread(target=proc.wait, name="herdr-server-reaper", daemon=True).start()
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                if self._answers():
                    return
                if proc.poll() not in (None, 0):
                    if self._answers():  # another orcr won the race
                        return
                    raise DriverError(
                        f"{binary} --session {self.session} server exited with status "
                        f"{proc.returncode} before answering at {self.socket_path}",
                        code="herdr_start_failed",
                    )
                time.sleep(0.05)
            raise DriverError(
                f"herdr server did not answer at {self.socket_path} within {START_TIMEOUT:g}s",
                code="herdr_unavailable",
                retryable=True,
            )

    # ------------------------------------------------------------ workspaces, start
    def ensure_workspace(self, level1: str) -> str:
        """The workspace labelled ``level1`` (looked up every time), created when missing."""
        with self._workspace_lock:
            for ws in self.request("workspace.list", {})["workspaces"]:
                if ws.get("label") == level1:
                    return ws["workspace_id"]
            cwd = Path(self.config.data_dir)
            cwd.mkdir(parents=True, exist_ok=True)
            created = self.request(
                "workspace.create", {"label": level1, "cwd": str(cwd), "focus": False}
            )
            ws_id = created["workspace"]["workspace_id"]
            self._bootstrap[ws_id] = created["root_pane"]["pane_id"]
            return ws_id

    def start(self, spec: StartSpec) -> PaneRef:
        """``layout.apply``: a new tab whose one pane runs ``spec.argv`` (no shell), labelled."""
        why = missing_program(spec.argv, spec.env, spec.cwd)
        if why is not None:
            # herdr would start the tab, the exec would fail and the pane vanish
            raise DriverError(why, code="command_not_found")
        root = {
            "type": "pane",
            "label": spec.label,
            "cwd": spec.cwd,
            "command": list(spec.argv),
            "env": dict(spec.env),
        }
        params = {
            "workspace_id": spec.workspace_id,
            "tab_label": tab_label(
                spec.label.rstrip("/").rsplit("/", 1)[-1], spec.instance, spec.launch_token
            ),
            "focus": False,
            "root": root,
        }
        layout = self.request("layout.apply", params)["layout"]
        ref = PaneRef(layout["workspace_id"], layout["tab_id"], _first_pane_id(layout["root"]))
        self._close_bootstrap_shell(spec.workspace_id)
        return ref

    def _close_bootstrap_shell(self, workspace_id: str) -> None:
        """A new workspace comes with a shell tab; drop it once an agent tab exists.

        Only the shell this driver created (remembered in memory) and only while
        it is still unlabelled; after an orcr restart a leftover shell stays.
        """
        pane_id = self._bootstrap.pop(workspace_id, None)
        if pane_id is None:
            return
        try:
            pane = self.request("pane.get", {"pane_id": pane_id})["pane"]
            if not pane.get("label"):
                self.request("pane.close", {"pane_id": pane_id})
        except DriverError:
            pass

    # ------------------------------------------------------------ panes
    def _pane(self, pane: PaneRef) -> dict:
        return self.request("pane.get", {"pane_id": pane.pane_id})["pane"]

    def session_pointer(self, pane: PaneRef) -> SessionPointer | None:
        return pointer(self._pane(pane).get("agent_session"))

    def send_prompt(self, pane: PaneRef, text: str) -> None:
        """The two-call rule: the text (a paste if the app enabled it), a pause, then Enter."""
        self.paste_prompt(pane, text)
        self.submit_prompt(pane)

    def paste_prompt(self, pane: PaneRef, text: str) -> None:
        """The first call alone: the text, never Enter (orcr records each call)."""
        self._input(pane, "pane.send_input", {"text": text}, "before its prompt was pasted")
        self._pasted[pane.pane_id] = time.monotonic()

    def submit_prompt(self, pane: PaneRef) -> None:
        """The second call: Enter, :attr:`submit_delay` after this driver's paste into
        the pane (at once when it pasted nothing there: the paste was long ago)."""
        pasted = self._pasted.pop(pane.pane_id, None)
        if pasted is not None:
            time.sleep(max(0.0, pasted + self.submit_delay - time.monotonic()))
        when = "before Enter was pressed on its prompt"
        self._input(pane, "pane.send_keys", {"keys": ["enter"]}, when)

    def _input(self, pane: PaneRef, method: str, params: dict, when: str) -> None:
        """Type into the pane, only if it carries this agent's marks (when ``pane`` has
        any). herdr reuses a pane id after a restart: its workspace counter is not
        saved, so a workspace lost or closed before the restart gives its id, and its
        panes' ids, to the next one made (ORCR-NOTES §6); a starting agent's recorded
        id can name another agent's pane by then (the soak saw it on tmux). herdr has
        no conditional input, so the marks are read first (``pane.get``, ``tab.get``);
        ids are not reused while a server lives, so only a restart between the read
        and the input could still misdirect it."""
        try:
            if pane.instance is not None or pane.launch_token is not None:
                mine = self._marks(pane) == (pane.instance, pane.launch_token)
            else:
                mine = True
            if mine:
                self.request(method, {"pane_id": pane.pane_id, **params})
        except DriverError as exc:
            if exc.code not in ("pane_not_found", "tab_not_found"):
                raise
            # herdr removes a pane whose program exited
            raise DriverError(
                f"the pane is gone (its program exited) {when}", code="pane_dead"
            ) from exc
        if not mine:
            raise DriverError(
                f"pane {pane.pane_id} is not this agent's any more (herdr restarted and gave "
                f"its id to another pane) {when}",
                code="pane_not_found",
            )

    def _marks(self, pane: PaneRef) -> tuple[str | None, str | None]:
        """The marks on the pane's tab label: (instance, launch token)."""
        tab_id = self._pane(pane)["tab_id"]
        return parse_marks(self.request("tab.get", {"tab_id": tab_id})["tab"].get("label"))

    def send_keys(self, pane: PaneRef, keys: list[str]) -> None:
        self.request("pane.send_keys", {"pane_id": pane.pane_id, "keys": list(keys)})

    def read(self, pane: PaneRef) -> str:
        """A passive read of the visible screen (``recent`` can make herdr scroll the app)."""
        params = {"pane_id": pane.pane_id, "source": "visible", "format": "text"}
        return self.request("pane.read", params)["read"]["text"]

    def close(self, pane: PaneRef) -> None:
        """``pane.close``; with marks on ``pane``, only if its tab carries them.

        herdr has no conditional close, so the marks are read first
        (``pane.get``, ``tab.get``). herdr never reuses a pane id while its
        server lives, so the pane checked is the pane closed (after a restart
        an id can name another pane: see :meth:`_input`).
        """
        try:
            if pane.instance is not None or pane.launch_token is not None:
                if self._marks(pane) != (pane.instance, pane.launch_token):
                    return  # not this row's pane: never touched
            self.request("pane.close", {"pane_id": pane.pane_id})
        except DriverError as exc:
            if exc.code not in ("pane_not_found", "tab_not_found"):
                raise

    # ------------------------------------------------------------ park, un-park
    @staticmethod
    def parking_label() -> str:
        return PARKING_PREFIX + dirs.instance_id()

    def move(self, pane: PaneRef, dest: str) -> PaneRef:
        """``pane.move`` into a new tab of the parking workspace (``dest``
        :data:`PARKING`, created on demand) or of the workspace ``dest``.

        The new tab gets the agent's tab label, marks included, in the same
        request, so the marks never leave the pane. herdr keeps the terminal
        (process, label) and gives the pane a new id in another workspace; the
        emptied tab (and workspace) closes by itself. The marks are checked
        first, as :meth:`close` does.
        """
        try:
            info = self._pane(pane)
            label = self.request("tab.get", {"tab_id": info["tab_id"]})["tab"].get("label")
        except DriverError as exc:
            if exc.code in ("pane_not_found", "tab_not_found"):
                raise DriverError(f"pane {pane.pane_id} not found", code="pane_not_found") from exc
            raise
        if (pane.instance is not None or pane.launch_token is not None) and parse_marks(label) != (
            pane.instance,
            pane.launch_token,
        ):
            raise DriverError(f"pane {pane.pane_id} is not this agent's", code="pane_not_found")
        workspace_id = self.ensure_workspace(self.parking_label()) if dest == PARKING else dest
        destination = {"type": "new_tab", "workspace_id": workspace_id, "label": label}
        result = self.request(
            "pane.move", {"pane_id": pane.pane_id, "destination": destination, "focus": False}
        )["move_result"]
        moved = result["pane"]
        if not result.get("changed") and moved.get("workspace_id") != workspace_id:
            raise DriverError(
                f"herdr did not move pane {pane.pane_id}: {result.get('reason')}",
                code="pane_move_failed",
            )
        self._close_bootstrap_shell(workspace_id)  # a new workspace's shell tab
        return PaneRef(moved["workspace_id"], moved["tab_id"], moved["pane_id"])

    def focus(self, pane: PaneRef) -> None:
        """Make the pane the focused one (``orcr agent attach`` then attaches a client)."""
        self.request("pane.focus", {"pane_id": pane.pane_id})

    def pane_pid(self, pane: PaneRef) -> int | None:
        """The pane's shell process (``pane.process_info`` ``shell_pid``), the root of
        what the agent started. herdr's snapshot carries no pid, so orcr asks this
        once per agent and walks the tree itself (psutil); None when herdr does not say."""
        pid = (self._resume.process_info(pane) or {}).get("shell_pid")
        return pid if isinstance(pid, int) and pid > 0 else None

    # ------------------------------------------------------------ native resume (0.9)
    def reports_resume(self) -> bool:
        """Whether herdr takes a ``resume_argv`` (0.9, socket protocol 22)."""
        return self._resume.reports_resume()

    def report_resume(
        self,
        pane: PaneRef,
        agent: str,
        state: str,
        argv: list[str],
        env: dict[str, str],
        detected: str | None = None,
    ) -> bool:
        """``pane.report_agent`` with ``resume_argv`` (:meth:`ResumeReports.report_resume`)."""
        return self._resume.report_resume(pane, agent, state, argv, env, detected)

    def foreground_pids(self, pane: PaneRef) -> list[int] | None:
        """The pane's foreground processes but its shell; None when herdr cannot say yet."""
        return self._resume.foreground_pids(pane)

    def agent_status(self, pane: PaneRef) -> str | None:
        info = self._pane(pane)
        return info.get("agent_status", "unknown") if info.get("agent") else None

    def snapshot(self) -> list[PaneInfo]:
        snap = self.request("session.snapshot", {})["snapshot"]
        marks = {t.get("tab_id"): parse_marks(t.get("label")) for t in snap.get("tabs", [])}
        parking = self.parking_label()
        # AgentInfo.completion_seq (0.9.2+; omitted or null when not set: both read as None)
        done = {a.get("pane_id"): a.get("completion_seq") for a in snap.get("agents", [])}
        parked = {
            w.get("workspace_id") for w in snap.get("workspaces", []) if w.get("label") == parking
        }
        return [
            PaneInfo(
                pane_id=p["pane_id"],
                workspace_id=p["workspace_id"],
                tab_id=p["tab_id"],
                label=p.get("label") or None,
                agent=p.get("agent") or None,
                agent_status=p.get("agent_status") or "unknown",
                agent_session=pointer(p.get("agent_session")),
                session=self.session,
                terminal_id=p.get("terminal_id"),
                instance=marks.get(p["tab_id"], (None, None))[0],
                launch_token=marks.get(p["tab_id"], (None, None))[1],
                parked=p["workspace_id"] in parked,
                restore_error=p.get("restore_error") or None,  # herdr 0.9.2+
                completion_seq=done.get(p["pane_id"]) if p.get("agent") else None,
            )
            for p in snap.get("panes", [])
        ]

    def discover(self) -> dict[str, list[UnmanagedAgent] | None]:
        """The agents herdr detects in the user's other sessions (read-only):
        :func:`orcr_herdr.discover.discover`."""
        return discovery.discover(self.session, self.socket_path)

    def events(
        self,
        subscriptions: list[dict] | None = None,
        stop: threading.Event | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> Iterator[dict]:
        """Pushed events (hints only; a new stream replays old ones). Ends when herdr closes it.

        ``on_start`` is called once the subscription is acknowledged."""
        yield from self.client.subscribe(
            subscriptions or DEFAULT_SUBSCRIPTIONS, stop=stop, on_start=on_start
        )
