"""The herdr driver: orcr's agents run in panes of orcr's own herdr session.

Recovery anchor: every agent pane carries the agent's full path as its herdr
pane label, and every top-level path segment is a workspace labelled with it.
Both survive a herdr restart (ids too, but terminal ids do not), so the driver
never remembers an id across calls: it asks herdr (``workspace.list``,
``session.snapshot``) and matches labels.

Marks: the orcr instance id and the row's launch token ride on the agent's own
tab label (:func:`tab_label`); :meth:`HerdrDriver.snapshot` reports them and a
:meth:`HerdrDriver.close` that names marks closes only a pane carrying them.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
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
    UnmanagedAgent,
)
from orcr_herdr.client import HerdrClient
from orcr_herdr.paths import session_socket, sessions

SUPPORTED_PROTOCOLS = frozenset({19, 20})
REQUIRED_VERSION = "herdr 0.8.x (socket protocol 19 or 20)"
SUBMIT_DELAY = 0.3  # herdr's own AGENT_PROMPT_SUBMIT_DELAY
#: seconds a discovery read of another session may take: the monitor waits on it
DISCOVER_TIMEOUT = 2.0
START_TIMEOUT = 15.0
HERDR_CONFIG = """\
# Written by orcr: the config of orcr's own herdr server (passed as HERDR_CONFIG_PATH).
# orcr relaunches agents itself after a restart, with its own flags.
onboarding = false

[session]
resume_agents_on_restore = false
"""
#: Variables a process inherits when it runs inside someone else's herdr pane.
_INHERITED = (
    "HERDR_SOCKET_PATH",
    "HERDR_CLIENT_SOCKET_PATH",
    "HERDR_ENV",
    "HERDR_PANE_ID",
    "HERDR_TAB_ID",
    "HERDR_WORKSPACE_ID",
    "HERDR_BIN_PATH",
    "HERDR_SESSION",
)
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


def _pointer(raw: Any) -> SessionPointer | None:
    if not isinstance(raw, dict) or not raw.get("value"):
        return None
    return SessionPointer(
        source=raw.get("source", ""), kind=raw.get("kind", "id"), value=raw["value"]
    )


#: The parking workspace's label is ``orcr-parked-<instance id>``: a ``-`` never
#: occurs in a level-1 segment, so no agent workspace can carry it.
PARKING_PREFIX = "orcr-parked-"

#: The marks on an agent's tab label: ``<name> [orcr:<instance>:<launch token>]``.
_MARKS = re.compile(r"\[orcr:([A-Za-z0-9_-]+):([A-Za-z0-9_-]+)\]$")


def tab_label(leaf: str, instance: str, launch_token: str) -> str:
    """The label of an agent's tab: its name, then the pane's marks.

    herdr's socket exposes no pane env and no user data on a pane; the tab
    label is the one thing besides the pane label that ``layout.apply`` sets
    atomically with the pane and herdr persists across restarts. Each agent
    has a tab of its own, so the tab's marks are the pane's.
    """
    if not (instance and launch_token):
        return leaf
    return f"{leaf} [orcr:{instance}:{launch_token}]"


def parse_marks(label: str | None) -> tuple[str | None, str | None]:
    m = _MARKS.search(label or "")
    return (m.group(1), m.group(2)) if m else (None, None)


def _running(sock: Path) -> bool:
    """Whether something accepts connections on ``sock`` (herdr's own ``running``)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(DISCOVER_TIMEOUT)
    try:
        probe.connect(str(sock))
        return True
    except OSError as exc:
        return exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK)
    finally:
        probe.close()


def _unmanaged(session: str, snap: dict) -> list[UnmanagedAgent]:
    """The agents of another session's snapshot (panes with a detected agent)."""
    marked = {t.get("tab_id") for t in snap.get("tabs", []) if parse_marks(t.get("label"))[0]}
    names = {a.get("terminal_id"): a.get("name") for a in snap.get("agents", [])}
    out = []
    for p in snap.get("panes", []):
        if not p.get("agent") or not p.get("terminal_id") or p.get("tab_id") in marked:
            continue
        out.append(
            UnmanagedAgent(
                session=session,
                terminal_id=p["terminal_id"],
                agent=p["agent"],
                agent_status=p.get("agent_status") or "unknown",
                pane_id=p.get("pane_id"),
                workspace_id=p.get("workspace_id"),
                tab_id=p.get("tab_id"),
                cwd=p.get("foreground_cwd") or p.get("cwd") or None,
                label=p.get("label") or None,
                name=names.get(p["terminal_id"]) or None,
                agent_session=_pointer(p.get("agent_session")),
            )
        )
    return out


def _first_pane_id(node: dict) -> str:
    if node.get("type") == "split":
        return _first_pane_id(node["first"])
    return node["pane_id"]


class HerdrDriver:
    """:class:`orcr_core.contracts.Driver` over herdr's socket API."""

    name = "herdr"

    def __init__(self, config: Any, *, submit_delay: float = SUBMIT_DELAY):
        self.config = config
        self.session = str(config.get("herdr.session") or dirs.mux_name())
        self.binary = str(config.get("herdr.binary") or "herdr")
        explicit = str(config.get("herdr.socket") or "")
        self.owns_server = not explicit  # an explicit socket is someone else's server
        self.socket_path = explicit or str(session_socket(self.session))
        self.submit_delay = max(submit_delay, SUBMIT_DELAY)
        self.client = HerdrClient(self.socket_path)
        self._session_lock = threading.Lock()
        self._workspace_lock = threading.Lock()
        self._bootstrap: dict[str, str] = {}  # workspace id -> its creation shell pane
        self._server: subprocess.Popen | None = None

    # ------------------------------------------------------------ availability
    @classmethod
    def available(cls, config: Any = None) -> tuple[bool, str]:
        """Whether the herdr binary (``herdr.binary``) is on PATH."""
        binary = "herdr"
        if config is None:
            try:
                from orcr_core.config import load

                config = load()
            except Exception:
                config = None
        if config is not None:
            binary = str(config.get("herdr.binary") or "herdr")
            if config.get("herdr.socket"):
                return True, f"herdr.socket = {config.get('herdr.socket')!r} (connect only)"
        found = shutil.which(binary)
        if found:
            return True, f"herdr found at {found}"
        return False, f"herdr binary {binary!r} not found on PATH (needs {REQUIRED_VERSION})"

    # ------------------------------------------------------------ server
    def request(self, method: str, params: dict | None = None) -> dict:
        return self.client.request(method, params)

    def handshake(self) -> dict[str, Any]:
        pong = self.client.request("ping", {})
        protocol, version = pong.get("protocol"), pong.get("version", "?")
        if protocol not in SUPPORTED_PROTOCOLS:
            raise DriverError(
                f"herdr {version} at {self.socket_path} speaks socket protocol {protocol}; "
                f"orcr needs {REQUIRED_VERSION}: install herdr 0.8 and restart its server "
                f"(herdr session stop {self.session})",
                code="unsupported_herdr_protocol",
            )
        return {
            "version": version,
            "protocol": protocol,
            "socket": self.socket_path,
            "session": self.session,
        }

    def _answers(self) -> bool:
        try:
            self.client.request("ping", {}, attempts=1)
            return True
        except DriverError as exc:
            if exc.retryable:
                return False
            raise

    def herdr_config_path(self) -> Path:
        return Path(self.config.data_dir) / "herdr-config.toml"

    def _write_herdr_config(self) -> Path:
        path = self.herdr_config_path()
        if path.exists() and path.read_text() == HERDR_CONFIG:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".herdr-config-", suffix=".toml")
        with os.fdopen(fd, "w") as f:
            f.write(HERDR_CONFIG)
        os.replace(tmp, path)
        return path

    def ensure_session(self) -> None:
        """Start ``herdr --session <name> server`` detached unless it already answers."""
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
            env = {k: v for k, v in os.environ.items() if k not in _INHERITED}
            env["HERDR_CONFIG_PATH"] = str(self._write_herdr_config())
            proc = subprocess.Popen(
                [binary, "--session", self.session, "server"],
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
        return _pointer(self._pane(pane).get("agent_session"))

    def send_prompt(self, pane: PaneRef, text: str) -> None:
        """The two-call rule: the text (a paste if the app enabled it), a pause, then Enter."""
        when = "before its prompt was pasted"
        try:
            self.request("pane.send_input", {"pane_id": pane.pane_id, "text": text})
            time.sleep(self.submit_delay)
            when = "before Enter was pressed on its prompt"
            self.request("pane.send_keys", {"pane_id": pane.pane_id, "keys": ["enter"]})
        except DriverError as exc:
            if exc.code != "pane_not_found":
                raise
            # herdr removes a pane whose program exited
            raise DriverError(
                f"the pane is gone (its program exited) {when}", code="pane_dead"
            ) from exc

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
        server lives and restores the same ids (and tab labels) after a
        restart, so the pane checked is the pane closed.
        """
        try:
            if pane.instance is not None or pane.launch_token is not None:
                tab_id = self._pane(pane)["tab_id"]
                label = self.request("tab.get", {"tab_id": tab_id})["tab"].get("label")
                if parse_marks(label) != (pane.instance, pane.launch_token):
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
        try:
            info = self.request("pane.process_info", {"pane_id": pane.pane_id})
        except DriverError as exc:
            if exc.code == "pane_not_found":
                return None
            raise
        pid = info.get("process_info", {}).get("shell_pid")
        return pid if isinstance(pid, int) and pid > 0 else None

    def agent_status(self, pane: PaneRef) -> str | None:
        info = self._pane(pane)
        return info.get("agent_status", "unknown") if info.get("agent") else None

    def snapshot(self) -> list[PaneInfo]:
        snap = self.request("session.snapshot", {})["snapshot"]
        marks = {t.get("tab_id"): parse_marks(t.get("label")) for t in snap.get("tabs", [])}
        parking = self.parking_label()
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
                agent_session=_pointer(p.get("agent_session")),
                session=self.session,
                terminal_id=p.get("terminal_id"),
                instance=marks.get(p["tab_id"], (None, None))[0],
                launch_token=marks.get(p["tab_id"], (None, None))[1],
                parked=p["workspace_id"] in parked,
            )
            for p in snap.get("panes", [])
        ]

    def discover(self) -> dict[str, list[UnmanagedAgent] | None]:
        """The agents herdr detects in the user's other sessions (read-only).

        Every session with a socket under herdr's config dir except orcr's own
        (by name and by socket path) gets one ``session.snapshot``. A session
        whose socket is missing or refuses is not running: it is left out (its
        agents are gone). One that does not answer in time, or answers an
        error, maps to None (nothing is known; its rows stay as they are).
        Panes whose tab carries orcr marks belong to an orcr instance (managed
        there) and are not listed; plain shells are not agents.
        """
        own = os.path.realpath(self.socket_path)
        found: dict[str, list[UnmanagedAgent] | None] = {}
        for name, sock in sessions():
            if name == self.session or os.path.realpath(sock) == own:
                continue
            client = HerdrClient(sock, timeout=DISCOVER_TIMEOUT, attempts=1)
            try:
                snap = client.request("session.snapshot", {})["snapshot"]
            except DriverError:
                if not _running(sock):
                    continue
                found[name] = None
                continue
            found[name] = _unmanaged(name, snap)
        return found

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
