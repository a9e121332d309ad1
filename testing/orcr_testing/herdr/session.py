"""The emulated herdr session: workspaces, tabs and panes, the events their
changes emit (with herdr's close quirks, ORCR-NOTES §7 and §9.5), what a restart
restores, and pane input with the optional "Enter too early" failure modes.

:class:`SessionState` is a part of :class:`orcr_testing.herdr.emulator.Emulator`
(its ``state``): it owns the session's model and its event hub, and reads of the
emulator only the settings :class:`SessionHost` names (a test may change them
while it runs). Every method runs under the emulator's lock.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from orcr_testing.herdr import persist
from orcr_testing.herdr.dialect import Dialect
from orcr_testing.herdr.events import EventHub
from orcr_testing.herdr.ids import encode_number, new_terminal_id
from orcr_testing.herdr.model import (
    DETECTED,
    RESUME_ARGV,
    InputRecord,
    Pane,
    Tab,
    Views,
    Workspace,
)
from orcr_testing.herdr.ptyproc import PaneProcess
from orcr_testing.herdr.transport import ApiError

ENTER_TOO_EARLY_WINDOW = 0.3
#: what herdr 0.9.2 no longer passes from its own environment into new panes
#: (the variables #4104 names; herdr publishes no complete list)
_HOST_MARKERS = frozenset(
    {"CLAUDECODE", "ITERM_SESSION_ID", "TERM_SESSION_ID", "WT_SESSION", "TERM_PROGRAM_VERSION"}
)


#: seconds from a cold restart to a native resume typed into the pane's new shell
RESUME_DELAY = 0.75


class SessionHost(Protocol):
    """What :class:`SessionState` reads of its emulator (settings a test may change)."""

    dialect: Dialect
    shell: list[str]
    rows: int
    cols: int
    detect_agents: bool
    resume_agents: bool
    enter_too_early: bool
    enter_window: float
    drop_enter_probability: float
    rng: random.Random
    socket_path: str
    herdr_bin: str
    session: str | None

    @property
    def session_file(self) -> Path: ...


class SessionState:
    """The session's model and the operations on it, shared by the request handlers,
    the tick and the test hooks. ``check(kind, message)`` validates each event it
    emits (the emulator's schema check)."""

    def __init__(self, host: SessionHost, check: Callable[[str, dict], list[str]]):
        self.host = host
        self.check = check
        self.workspaces: dict[str, Workspace] = {}
        self.focused_ws: str | None = None
        self.next_ws = 1
        self.hub = EventHub()
        self.views = Views(self)
        self.dirty_at: float | None = None  # the first change not yet saved
        self.resume_at: dict[str, float] = {}  # pane id -> when its native resume is typed

    def mark_dirty(self) -> None:
        if self.dirty_at is None:
            self.dirty_at = time.monotonic()

    def save(self) -> None:
        persist.save(self.host.session_file, list(self.workspaces.values()), self.focused_ws)
        self.dirty_at = None

    def emit(self, name: str, data: dict) -> dict:
        envelope = self.hub.publish(name, data)
        self.check("event", envelope)
        return envelope

    # ------------------------------------------------------------------ restart
    def kill_all(self) -> None:
        """Every pane's process killed and the model emptied (a stop or a crash)."""
        for ws in self.workspaces.values():
            for pane in ws.panes():
                if pane.proc is not None:
                    pane.proc.kill_now()
                    pane.proc = None
        self.workspaces.clear()
        self.resume_at.clear()

    def restore(self) -> None:
        """``session.json`` as a restart finds it: same ids and labels, new terminal
        ids, plain shells (or a pending native resume when ``resume_agents``)."""
        restored, focused = persist.load(self.host.session_file)
        self.workspaces = {}
        self.focused_ws = None
        seen_sessions: set[tuple[str, str]] = set()
        for ws in restored:
            self.workspaces[ws.workspace_id] = ws
            for pane in ws.panes():
                pane.terminal_id = new_terminal_id()
                session = pane.agent_session
                key = (session["agent"], session["value"]) if session else None
                # a reported resume_argv (0.9.2) takes precedence over the built-in one
                resumable = (
                    self.host.resume_agents
                    and (pane.resume_argv or (session and session["agent"] in RESUME_ARGV))
                    and (key is None or key not in seen_sessions)
                )
                if resumable:
                    seen_sessions.add(key)
                    pane.pending_resume = True
                    self.resume_at[pane.pane_id] = time.monotonic() + RESUME_DELAY
                    continue
                pane.agent, pane.resume_argv = None, None
                if self.host.dialect.restore_error and not os.path.isdir(pane.cwd):
                    # 0.9.2: the pane stays, with an error, its saved directory and
                    # session reference intact, instead of a shell in $HOME
                    pane.restore_error = f"saved directory is unavailable: {pane.cwd}"
                    continue
                pane.agent_session = None
                self.start_process(pane, None, None)
        self.focused_ws = (
            focused if focused in self.workspaces else next(iter(self.workspaces), None)
        )
        numbers = [ws.number for ws in self.workspaces.values()]
        self.next_ws = max(numbers, default=0) + 1

    # ------------------------------------------------------------------ model
    def pane(self, pane_id: str) -> Pane:
        for ws in self.workspaces.values():
            for tab in ws.tabs:
                for pane in tab.panes:
                    if pane.pane_id == pane_id:
                        return pane
        raise KeyError(pane_id)

    def find_pane(self, pane_id: str, live: bool = False) -> Pane:
        """The pane or ``pane_not_found`` (``live``: pending-resume panes count as missing)."""
        try:
            pane = self.pane(pane_id)
        except KeyError:
            raise ApiError("pane_not_found", f"pane {pane_id} not found") from None
        if live and not pane.live:
            raise ApiError("pane_not_found", f"pane {pane_id} not found")
        return pane

    def find_tab(self, tab_id: str) -> Tab | None:
        ws = self.workspaces.get(tab_id.split(":")[0])
        if ws is None:
            return None
        return next((t for t in ws.tabs if t.tab_id == tab_id), None)

    def find_workspace(self, workspace_id: str | None) -> Workspace:
        if workspace_id is None:
            if self.focused_ws is None:
                raise ApiError("workspace_not_found", "no active workspace")
            workspace_id = self.focused_ws
        ws = self.workspaces.get(workspace_id)
        if ws is None:
            raise ApiError("workspace_not_found", f"workspace {workspace_id} not found")
        return ws

    def pane_env(self, pane: Pane, env: dict[str, str] | None) -> dict[str, str]:
        out = {k: v for k, v in os.environ.items() if k != "CODEX_THREAD_ID"}
        if self.host.dialect.clean_pane_env:  # 0.9.2 (#4104); its exact list is not published
            out = {k: v for k, v in out.items() if k not in _HOST_MARKERS}
            out = {k: v for k, v in out.items() if not k.startswith("CLAUDE_CODE_")}
            out["TERM_PROGRAM"] = "herdr"
        out.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
        out.update(env or {})
        out.update(
            {
                "HERDR_ENV": "1",
                "HERDR_SOCKET_PATH": self.host.socket_path,
                "HERDR_BIN_PATH": self.host.herdr_bin,
                "HERDR_WORKSPACE_ID": pane.workspace_id,
                "HERDR_TAB_ID": pane.tab_id,
                "HERDR_PANE_ID": pane.pane_id,
            }
        )
        if self.host.session:
            out["HERDR_SESSION"] = self.host.session
        out.pop("CODEX_THREAD_ID", None)
        return out

    def start_process(self, pane: Pane, argv: list[str] | None, env: dict | None) -> None:
        cwd = pane.cwd if os.path.isdir(pane.cwd) else os.path.expanduser("~")
        try:
            pane.proc = PaneProcess(
                argv or self.host.shell,
                cwd,
                self.pane_env(pane, env),
                self.host.rows,
                self.host.cols,
            )
        except OSError as exc:
            raise ApiError("layout_apply_failed", f"failed to start {argv!r}: {exc}") from None
        pane.own_shell = not argv  # herdr's default shell: a self-report drop applies

    def new_workspace(self, cwd: str, label: str | None, env: dict | None, focus: bool):
        ws_id = f"w{encode_number(self.next_ws)}"
        ws = Workspace(ws_id, self.next_ws, cwd, custom_label=label or None)
        self.next_ws += 1
        self.workspaces[ws_id] = ws
        tab = self.new_tab(ws, None)
        pane = self.new_pane(ws, tab, cwd, None, env, None)
        self.emit("workspace_created", {"workspace": self.views.workspace(ws)})
        self.emit("tab_created", {"tab": self.views.tab(tab)})
        self.emit("pane_created", {"pane": self.views.pane(pane)})
        self.emit("layout_updated", {"layout": self.views.layout(tab)})
        if focus or self.focused_ws is None:
            self.focus_pane(pane)
        self.mark_dirty()
        return ws, tab, pane

    def new_tab(self, ws: Workspace, label: str | None) -> Tab:
        tab = Tab(f"{ws.workspace_id}:t{encode_number(ws.next_tab)}", ws.workspace_id, ws.next_tab)
        tab.custom_label = label or None
        ws.next_tab += 1
        ws.tabs.append(tab)
        if ws.active_tab_id is None:
            ws.active_tab_id = tab.tab_id
        return tab

    def new_pane(
        self,
        ws: Workspace,
        tab: Tab,
        cwd: str,
        argv: list[str] | None,
        env: dict | None,
        label: str | None,
    ) -> Pane:
        pane = Pane(
            f"{ws.workspace_id}:p{encode_number(ws.next_pane)}",
            ws.workspace_id,
            tab.tab_id,
            ws.next_pane,
            cwd,
            label=label,
            launch_argv=list(argv) if argv else None,
        )
        self.start_process(pane, argv, env)
        ws.next_pane += 1
        tab.panes.append(pane)
        if tab.focused_pane_id is None:
            tab.focused_pane_id = pane.pane_id
        if self.host.detect_agents and argv and DETECTED.get(os.path.basename(argv[0])):
            pane.agent_authority = "detect"
            pane.agent = DETECTED[os.path.basename(argv[0])]
        return pane

    def focus_pane(self, pane: Pane) -> None:
        ws = self.workspaces[pane.workspace_id]
        tab = self.find_tab(pane.tab_id)
        assert tab is not None
        if self.focused_ws != ws.workspace_id:
            self.focused_ws = ws.workspace_id
            self.emit("workspace_focused", {"workspace_id": ws.workspace_id})
        if ws.active_tab_id != tab.tab_id:
            ws.active_tab_id = tab.tab_id
            self.emit("tab_focused", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if tab.focused_pane_id != pane.pane_id:
            tab.focused_pane_id = pane.pane_id
        self.emit("pane_focused", {"pane_id": pane.pane_id, "workspace_id": ws.workspace_id})
        if pane.agent_status == "done":
            self.set_status(pane, "idle")

    def drop_pane(self, pane: Pane) -> tuple[Workspace, Tab]:
        ws = self.workspaces[pane.workspace_id]
        tab = self.find_tab(pane.tab_id)
        assert tab is not None
        tab.panes.remove(pane)
        if pane.proc is not None:
            pane.proc.terminate()
            pane.proc = None
        self.resume_at.pop(pane.pane_id, None)
        if tab.focused_pane_id == pane.pane_id:
            tab.focused_pane_id = tab.panes[0].pane_id if tab.panes else None
        self.mark_dirty()
        return ws, tab

    def forget_tab(self, ws: Workspace, tab: Tab) -> None:
        ws.tabs.remove(tab)
        if ws.active_tab_id == tab.tab_id:
            ws.active_tab_id = ws.tabs[0].tab_id if ws.tabs else None

    def forget_workspace(self, ws: Workspace) -> None:
        del self.workspaces[ws.workspace_id]
        if self.focused_ws == ws.workspace_id:
            self.focused_ws = next(iter(self.workspaces), None)

    def remove_pane(self, pane: Pane, exited: bool) -> None:
        """Process exit: ``pane_exited`` only. ``pane.close``: ``pane_closed`` (+ workspace_closed)."""
        ws_info = self.views.workspace(self.workspaces[pane.workspace_id])
        ws, tab = self.drop_pane(pane)
        name = "pane_exited" if exited else "pane_closed"
        self.emit(name, {"pane_id": pane.pane_id, "workspace_id": ws.workspace_id})
        if tab.panes:
            if not exited:
                self.emit("layout_updated", {"layout": self.views.layout(tab)})
            return
        self.forget_tab(ws, tab)  # an emptied tab vanishes without tab_closed
        if ws.tabs:
            return
        self.forget_workspace(ws)
        if not exited:
            self.emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def close_tab(self, tab: Tab) -> None:
        ws = self.workspaces[tab.workspace_id]
        ws_info = self.views.workspace(ws)
        for pane in list(tab.panes):
            self.drop_pane(pane)
        self.forget_tab(ws, tab)
        self.emit("tab_closed", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if not ws.tabs:
            self.forget_workspace(ws)
            self.emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def close_workspace(self, ws: Workspace) -> None:
        ws_info = self.views.workspace(ws)
        for tab in list(ws.tabs):
            for pane in list(tab.panes):
                self.drop_pane(pane)
        self.forget_workspace(ws)
        self.emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def set_agent(self, pane: Pane, agent: str | None, status: str) -> None:
        if agent == pane.agent:
            if agent is not None:
                self.set_status(pane, status)
            return
        previous = pane.agent_status
        data: dict[str, Any] = {"pane_id": pane.pane_id, "workspace_id": pane.workspace_id}
        if agent is None:
            data.update({"released": True, "final_status": previous})
            pane.agent = None
            pane.agent_session = None
            pane.agent_status = "unknown"
            self.mark_dirty()
        else:
            data["agent"] = agent
            pane.agent = agent
        pane.completion_seq = None  # reset when the agent label changes
        self.emit("pane_agent_detected", data)
        if agent is not None:
            self.set_status(pane, status, force=True)

    def set_status(self, pane: Pane, status: str, force: bool = False) -> None:
        if status == pane.agent_status and not force:
            return
        previous = pane.agent_status
        pane.agent_status = status
        pane.state_change_seq += 1
        if self.host.dialect.completion_seq:  # 0.9.2: set by working/blocked -> idle, else cleared
            done = previous in ("working", "blocked") and status in ("idle", "done")
            pane.completion_seq = pane.state_change_seq if done else None
        payload: dict[str, Any] = {
            "pane_id": pane.pane_id,
            "workspace_id": pane.workspace_id,
            "agent_status": status,
        }
        if pane.agent:
            payload["agent"] = pane.agent
        self.hub.push_status(pane.pane_id, status, payload)

    # ------------------------------------------------------------------ input
    def deliver(self, pane: Pane, method: str, segments: list[tuple[str, bytes]]) -> None:
        """Write one request's bytes in ONE write, applying the Enter-swallowing modes.

        ``segments`` are ``("text"|"enter"|"key", bytes)`` in order.
        """
        now = time.monotonic()
        out = bytearray()
        sent = b"".join(data for _, data in segments)
        had_text, swallowed = False, 0
        for kind, data in segments:
            if kind == "text":
                out += data
                had_text = True
                pane.last_text_at = now
                pane.text_pending, pane.drop_decided = True, False
            elif kind == "enter":
                swallow = False
                if self.host.enter_too_early and (
                    had_text or now - pane.last_text_at < self.host.enter_window
                ):
                    swallow = True
                elif pane.text_pending and not pane.drop_decided:
                    pane.drop_decided = True
                    p = self.host.drop_enter_probability
                    swallow = p > 0 and self.host.rng.random() < p
                if swallow:
                    swallowed += 1
                else:
                    out += data
                    pane.text_pending = False
            else:
                out += data
        pane.inputs.append(InputRecord(time.time(), method, sent, bytes(out), swallowed))
        if out:
            assert pane.proc is not None
            try:
                pane.proc.write(bytes(out))
            except OSError as exc:
                raise ApiError(
                    "pane_send_failed", f"write to {pane.pane_id} failed: {exc}"
                ) from None

    def read_text(self, pane: Pane, source: str, lines: int | None) -> tuple[str, bool]:
        assert pane.proc is not None
        if source in ("recent", "recent_unwrapped"):
            rows = pane.proc.history_lines() + pane.proc.visible_lines()
            while rows and not rows[-1]:
                rows.pop()
            want = min(lines if lines is not None else 80, 1000)
        else:
            rows = pane.proc.visible_lines()
            while rows and not rows[-1]:  # trailing blank rows carry nothing
                rows.pop()
            want = lines
        truncated = False
        if want is not None and len(rows) > want:
            rows, truncated = rows[len(rows) - want :] if want else [], True
        return "\n".join(rows), truncated
