"""The emulator's session model and the wire shapes built from it (WorkspaceInfo, TabInfo, ...)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from orcr_testing.herdr.ids import new_terminal_id
from orcr_testing.herdr.ptyproc import PaneProcess

STATUS_RANK = {"blocked": 4, "working": 3, "done": 2, "idle": 1, "unknown": 0}
#: (source, agent) pairs herdr treats as official session reporters.
OFFICIAL_SOURCES = {
    "herdr:claude": "claude",
    "herdr:codex": "codex",
    "herdr:pi": "pi",
    "herdr:omp": "omp",
    "herdr:copilot": "copilot",
    "herdr:devin": "devin",
    "herdr:droid": "droid",
    "herdr:qodercli": "qodercli",
    "herdr:cursor": "cursor",
    "herdr:grok": "grok",
    "herdr:opencode": "opencode",
    "herdr:kimi": "kimi",
    "herdr:kilo": "kilo",
    "herdr:hermes": "hermes",
    "herdr:mastracode": "mastracode",
    "herdr:antigravity_cli": "agy",
}
#: session_start_source values allowed to replace a stored, different id.
REPLACE_SOURCES = {"claude": {"clear", "resume", "compact"}}
REPLACE_DEFAULT = {"startup", "clear", "resume", "compact"}
#: foreground process names herdr's detection recognises.
DETECTED = {"claude": "claude", "claude-code": "claude", "codex": "codex"}
RESUME_ARGV = {"claude": ["claude", "--resume"], "codex": ["codex", "resume"]}


@dataclass
class InputRecord:
    """One write into a pane: what the client sent and what reached the PTY."""

    at: float
    method: str
    sent: bytes
    delivered: bytes
    swallowed_enters: int = 0


@dataclass
class Pane:
    pane_id: str
    workspace_id: str
    tab_id: str
    number: int
    cwd: str
    label: str | None = None
    launch_argv: list[str] | None = None
    terminal_id: str = field(default_factory=new_terminal_id)
    proc: PaneProcess | None = None
    agent: str | None = None
    agent_status: str = "unknown"
    agent_authority: str | None = None  # None/"detect", "hook", or a custom report source
    agent_session: dict[str, str] | None = None
    session_seq: dict[str, int] = field(default_factory=dict)
    title: str = ""
    revision: int = 0
    state_change_seq: int = 0
    pending_resume: bool = False
    restore_error: str | None = None  # 0.9: restored without a process (saved cwd gone)
    completion_seq: int | None = None  # 0.9.2: the state_change_seq of the last completion
    #: 0.9.2: ``{source, agent, argv}`` a reporter attached (``resume_argv``); kept only
    #: while that source and agent hold the pane (:func:`resume_held`)
    resume_argv: dict | None = None
    #: the root process is the pane's default shell, not a ``command`` (:mod:`droprule`)
    own_shell: bool = False
    drop_check_at: float | None = None  # the next self-report drop check (:mod:`droprule`)
    # input bookkeeping for the "Enter too early" failure mode
    last_text_at: float = -1e9
    text_pending: bool = False
    drop_decided: bool = False
    inputs: list[InputRecord] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.proc is not None and not self.pending_resume


@dataclass
class Tab:
    tab_id: str
    workspace_id: str
    number: int
    custom_label: str | None = None
    panes: list[Pane] = field(default_factory=list)
    focused_pane_id: str | None = None
    zoomed: bool = False  # a zoomed tab refuses pane.move (reason zoomed_tab)

    @property
    def label(self) -> str:
        return self.custom_label or str(self.number)


@dataclass
class Workspace:
    workspace_id: str
    number: int
    cwd: str
    custom_label: str | None = None
    tabs: list[Tab] = field(default_factory=list)
    active_tab_id: str | None = None
    next_tab: int = 1
    next_pane: int = 1

    @property
    def label(self) -> str:
        if self.custom_label:
            return self.custom_label
        return os.path.basename(self.cwd.rstrip("/")) or self.cwd or "workspace"

    def panes(self) -> list[Pane]:
        return [p for t in self.tabs for p in t.panes]


def aggregate_status(panes: list[Pane]) -> str:
    best = "unknown"
    for pane in panes:
        if pane.agent and STATUS_RANK[pane.agent_status] > STATUS_RANK[best]:
            best = pane.agent_status
    return best


def _put(out: dict, key: str, value: Any) -> None:
    if value is not None and value != "":
        out[key] = value


class Views:
    """Builds wire dicts; needs to know what is focused and the positions of workspaces
    (the session's :class:`~orcr_testing.herdr.session.SessionState`, whose ``host``
    gives the PTY size)."""

    def __init__(self, state: Any):
        self.state = state

    def pane_focused(self, pane: Pane) -> bool:
        ws = self.state.workspaces.get(pane.workspace_id)
        tab = self.state.find_tab(pane.tab_id)
        return bool(
            ws
            and tab
            and self.state.focused_ws == ws.workspace_id
            and ws.active_tab_id == tab.tab_id
            and tab.focused_pane_id == pane.pane_id
        )

    def pane(self, pane: Pane) -> dict:
        out: dict[str, Any] = {
            "pane_id": pane.pane_id,
            "terminal_id": pane.terminal_id,
            "workspace_id": pane.workspace_id,
            "tab_id": pane.tab_id,
            "focused": self.pane_focused(pane),
            "agent_status": pane.agent_status if pane.agent else "unknown",
            "revision": pane.revision,
        }
        _put(out, "cwd", pane.cwd)
        _put(out, "label", pane.label)
        _put(out, "agent", pane.agent)
        if pane.title:
            out["terminal_title"] = pane.title
            out["terminal_title_stripped"] = pane.title.strip()
        if pane.agent_session:
            out["agent_session"] = dict(pane.agent_session)
        if pane.restore_error:
            out["restore_error"] = pane.restore_error
        return out

    def agent(self, pane: Pane) -> dict:
        out = self.pane(pane)
        for key in ("label",):
            out.pop(key, None)
        out["state_change_seq"] = pane.state_change_seq
        if pane.completion_seq is not None:  # omitted when null (not shown either way: §12)
            out["completion_seq"] = pane.completion_seq
        if pane.pending_resume:
            out["launch_pending"] = True
        return out

    def tab(self, tab: Tab) -> dict:
        ws = self.state.workspaces[tab.workspace_id]
        return {
            "tab_id": tab.tab_id,
            "workspace_id": tab.workspace_id,
            "number": tab.number,
            "label": tab.label,
            "focused": self.state.focused_ws == ws.workspace_id and ws.active_tab_id == tab.tab_id,
            "pane_count": len(tab.panes),
            "agent_status": aggregate_status(tab.panes),
        }

    def workspace(self, ws: Workspace) -> dict:
        order = list(self.state.workspaces)
        return {
            "workspace_id": ws.workspace_id,
            "number": order.index(ws.workspace_id) + 1 if ws.workspace_id in order else 0,
            "label": ws.label,
            "focused": self.state.focused_ws == ws.workspace_id,
            "pane_count": len(ws.panes()),
            "tab_count": len(ws.tabs),
            "active_tab_id": ws.active_tab_id or "",
            "agent_status": aggregate_status(ws.panes()),
        }

    def layout(self, tab: Tab) -> dict:
        """A PaneLayoutSnapshot: panes side by side in the virtual 80x24 frame."""
        cols, rows = self.state.host.cols, self.state.host.rows
        n = max(len(tab.panes), 1)
        width = max(cols // n, 1)
        panes = [
            {
                "pane_id": p.pane_id,
                "focused": p.pane_id == tab.focused_pane_id,
                "rect": {"x": i * width, "y": 0, "width": width, "height": rows},
            }
            for i, p in enumerate(tab.panes)
        ]
        return {
            "workspace_id": tab.workspace_id,
            "tab_id": tab.tab_id,
            "zoomed": tab.zoomed,
            "area": {"x": 0, "y": 0, "width": cols, "height": rows},
            "focused_pane_id": tab.focused_pane_id or "",
            "panes": panes,
            "splits": [],
        }


def resume_held(pane: Pane) -> list[str] | None:
    """The reported resume command while its reporter still holds the pane: the same
    agent, and for a custom source that source as the pane's authority."""
    r = pane.resume_argv
    if not r or pane.agent != r["agent"]:
        return None
    if OFFICIAL_SOURCES.get(r["source"]) != r["agent"] and pane.agent_authority != r["source"]:
        return None
    return list(r["argv"])
