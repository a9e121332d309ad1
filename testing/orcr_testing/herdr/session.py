"""The emulated herdr session: workspaces, tabs and panes, the events their
changes emit (with herdr's close quirks, ORCR-NOTES §7 and §9.5), and pane input
with the optional "Enter too early" failure modes.

:class:`SessionState` is a mixin of :class:`orcr_testing.herdr.emulator.Emulator`,
which owns the attributes used here; every method runs under the emulator's lock.
"""

from __future__ import annotations

import os
import time
from typing import Any

from orcr_testing.herdr import persist
from orcr_testing.herdr.ids import encode_number
from orcr_testing.herdr.model import DETECTED, InputRecord, Pane, Tab, Workspace
from orcr_testing.herdr.ptyproc import PaneProcess
from orcr_testing.herdr.transport import ApiError

ENTER_TOO_EARLY_WINDOW = 0.3
#: what herdr 0.9.2 no longer passes from its own environment into new panes
#: (the variables #4104 names; herdr publishes no complete list)
_HOST_MARKERS = frozenset(
    {"CLAUDECODE", "ITERM_SESSION_ID", "TERM_SESSION_ID", "WT_SESSION", "TERM_PROGRAM_VERSION"}
)


class SessionState:
    """State operations shared by the request handlers and the test hooks."""

    workspaces: dict[str, Workspace]
    focused_ws: str | None
    next_ws: int

    def _mark_dirty(self) -> None:
        if self._dirty_at is None:
            self._dirty_at = time.monotonic()

    def _save(self) -> None:
        persist.save(self.session_file, list(self.workspaces.values()), self.focused_ws)
        self._dirty_at = None

    def _emit(self, name: str, data: dict) -> dict:
        envelope = self.hub.publish(name, data)
        self._check("event", envelope)
        return envelope

    def _pane(self, pane_id: str) -> Pane:
        for ws in self.workspaces.values():
            for tab in ws.tabs:
                for pane in tab.panes:
                    if pane.pane_id == pane_id:
                        return pane
        raise KeyError(pane_id)

    def find_pane(self, pane_id: str, live: bool = False) -> Pane:
        """The pane or ``pane_not_found`` (``live``: pending-resume panes count as missing)."""
        try:
            pane = self._pane(pane_id)
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
        if self.dialect.clean_pane_env:  # 0.9.2 (#4104); its exact list is not published
            out = {k: v for k, v in out.items() if k not in _HOST_MARKERS}
            out = {k: v for k, v in out.items() if not k.startswith("CLAUDE_CODE_")}
            out["TERM_PROGRAM"] = "herdr"
        out.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
        out.update(env or {})
        out.update(
            {
                "HERDR_ENV": "1",
                "HERDR_SOCKET_PATH": self.socket_path,
                "HERDR_BIN_PATH": self.herdr_bin,
                "HERDR_WORKSPACE_ID": pane.workspace_id,
                "HERDR_TAB_ID": pane.tab_id,
                "HERDR_PANE_ID": pane.pane_id,
            }
        )
        if self.session:
            out["HERDR_SESSION"] = self.session
        out.pop("CODEX_THREAD_ID", None)
        return out

    def _start_process(self, pane: Pane, argv: list[str] | None, env: dict | None) -> None:
        cwd = pane.cwd if os.path.isdir(pane.cwd) else os.path.expanduser("~")
        try:
            pane.proc = PaneProcess(
                argv or self.shell, cwd, self.pane_env(pane, env), self.rows, self.cols
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
        self._emit("workspace_created", {"workspace": self.views.workspace(ws)})
        self._emit("tab_created", {"tab": self.views.tab(tab)})
        self._emit("pane_created", {"pane": self.views.pane(pane)})
        self._emit("layout_updated", {"layout": self.views.layout(tab)})
        if focus or self.focused_ws is None:
            self.focus_pane(pane)
        self._mark_dirty()
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
        self._start_process(pane, argv, env)
        ws.next_pane += 1
        tab.panes.append(pane)
        if tab.focused_pane_id is None:
            tab.focused_pane_id = pane.pane_id
        if self.detect_agents and argv and DETECTED.get(os.path.basename(argv[0])):
            pane.agent_authority = "detect"
            pane.agent = DETECTED[os.path.basename(argv[0])]
        return pane

    def focus_pane(self, pane: Pane) -> None:
        ws = self.workspaces[pane.workspace_id]
        tab = self.find_tab(pane.tab_id)
        assert tab is not None
        if self.focused_ws != ws.workspace_id:
            self.focused_ws = ws.workspace_id
            self._emit("workspace_focused", {"workspace_id": ws.workspace_id})
        if ws.active_tab_id != tab.tab_id:
            ws.active_tab_id = tab.tab_id
            self._emit("tab_focused", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if tab.focused_pane_id != pane.pane_id:
            tab.focused_pane_id = pane.pane_id
        self._emit("pane_focused", {"pane_id": pane.pane_id, "workspace_id": ws.workspace_id})
        if pane.agent_status == "done":
            self._set_status(pane, "idle")

    def _drop_pane(self, pane: Pane) -> tuple[Workspace, Tab]:
        ws = self.workspaces[pane.workspace_id]
        tab = self.find_tab(pane.tab_id)
        assert tab is not None
        tab.panes.remove(pane)
        if pane.proc is not None:
            pane.proc.terminate()
            pane.proc = None
        self._resume_at.pop(pane.pane_id, None)
        if tab.focused_pane_id == pane.pane_id:
            tab.focused_pane_id = tab.panes[0].pane_id if tab.panes else None
        self._mark_dirty()
        return ws, tab

    def _forget_tab(self, ws: Workspace, tab: Tab) -> None:
        ws.tabs.remove(tab)
        if ws.active_tab_id == tab.tab_id:
            ws.active_tab_id = ws.tabs[0].tab_id if ws.tabs else None

    def _forget_workspace(self, ws: Workspace) -> None:
        del self.workspaces[ws.workspace_id]
        if self.focused_ws == ws.workspace_id:
            self.focused_ws = next(iter(self.workspaces), None)

    def _remove_pane(self, pane: Pane, exited: bool) -> None:
        """Process exit: ``pane_exited`` only. ``pane.close``: ``pane_closed`` (+ workspace_closed)."""
        ws_info = self.views.workspace(self.workspaces[pane.workspace_id])
        ws, tab = self._drop_pane(pane)
        name = "pane_exited" if exited else "pane_closed"
        self._emit(name, {"pane_id": pane.pane_id, "workspace_id": ws.workspace_id})
        if tab.panes:
            if not exited:
                self._emit("layout_updated", {"layout": self.views.layout(tab)})
            return
        self._forget_tab(ws, tab)  # an emptied tab vanishes without tab_closed
        if ws.tabs:
            return
        self._forget_workspace(ws)
        if not exited:
            self._emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def close_tab(self, tab: Tab) -> None:
        ws = self.workspaces[tab.workspace_id]
        ws_info = self.views.workspace(ws)
        for pane in list(tab.panes):
            self._drop_pane(pane)
        self._forget_tab(ws, tab)
        self._emit("tab_closed", {"tab_id": tab.tab_id, "workspace_id": ws.workspace_id})
        if not ws.tabs:
            self._forget_workspace(ws)
            self._emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def close_workspace(self, ws: Workspace) -> None:
        ws_info = self.views.workspace(ws)
        for tab in list(ws.tabs):
            for pane in list(tab.panes):
                self._drop_pane(pane)
        self._forget_workspace(ws)
        self._emit("workspace_closed", {"workspace_id": ws.workspace_id, "workspace": ws_info})

    def _set_agent(self, pane: Pane, agent: str | None, status: str) -> None:
        if agent == pane.agent:
            if agent is not None:
                self._set_status(pane, status)
            return
        previous = pane.agent_status
        data: dict[str, Any] = {"pane_id": pane.pane_id, "workspace_id": pane.workspace_id}
        if agent is None:
            data.update({"released": True, "final_status": previous})
            pane.agent = None
            pane.agent_session = None
            pane.agent_status = "unknown"
            self._mark_dirty()
        else:
            data["agent"] = agent
            pane.agent = agent
        pane.completion_seq = None  # reset when the agent label changes
        self._emit("pane_agent_detected", data)
        if agent is not None:
            self._set_status(pane, status, force=True)

    def _set_status(self, pane: Pane, status: str, force: bool = False) -> None:
        if status == pane.agent_status and not force:
            return
        previous = pane.agent_status
        pane.agent_status = status
        pane.state_change_seq += 1
        if self.dialect.completion_seq:  # 0.9.2: set by working/blocked -> idle, else cleared
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
                if self.enter_too_early and (
                    had_text or now - pane.last_text_at < self.enter_window
                ):
                    swallow = True
                elif pane.text_pending and not pane.drop_decided:
                    pane.drop_decided = True
                    p = self.drop_enter_probability
                    swallow = p > 0 and self.rng.random() < p
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

    def _read_text(self, pane: Pane, source: str, lines: int | None) -> tuple[str, bool]:
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
