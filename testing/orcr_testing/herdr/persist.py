"""``session.json``: what survives a cold restart (ids, labels, cwd, launch argv, sessions).

The layout of this file is the emulator's own (herdr's is private); what it
keeps follows ``src/persist/*`` as summarised in ORCR-NOTES §12.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from orcr_testing.herdr.model import Pane, Tab, Workspace, resume_held

FORMAT = 1


def dump(workspaces: list[Workspace], focused_ws: str | None) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "focused_workspace_id": focused_ws,
        "workspaces": [
            {
                "workspace_id": ws.workspace_id,
                "number": ws.number,
                "cwd": ws.cwd,
                "custom_label": ws.custom_label,
                "active_tab_id": ws.active_tab_id,
                "next_tab": ws.next_tab,
                "next_pane": ws.next_pane,
                "tabs": [
                    {
                        "tab_id": tab.tab_id,
                        "number": tab.number,
                        "custom_label": tab.custom_label,
                        "focused_pane_id": tab.focused_pane_id,
                        "panes": [
                            {
                                "pane_id": p.pane_id,
                                "number": p.number,
                                "cwd": p.cwd,
                                "label": p.label,
                                "launch_argv": p.launch_argv,
                                "agent": p.agent,
                                "agent_session": p.agent_session,
                                "resume_argv": p.resume_argv if resume_held(p) else None,
                            }
                            for p in tab.panes
                        ],
                    }
                    for tab in ws.tabs
                ],
            }
            for ws in workspaces
        ],
    }


def save(path: Path, workspaces: list[Workspace], focused_ws: str | None) -> None:
    """Write atomically (a crash mid-write must not lose the previous file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".session-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(dump(workspaces, focused_ws), f, indent=1)
    os.replace(tmp, path)


def load(path: Path) -> tuple[list[Workspace], str | None]:
    """Workspaces with panes that have no process yet (the caller starts shells)."""
    if not path.exists():
        return [], None
    doc = json.loads(path.read_text())
    out = []
    for w in doc.get("workspaces", []):
        ws = Workspace(
            workspace_id=w["workspace_id"],
            number=w["number"],
            cwd=w["cwd"],
            custom_label=w.get("custom_label"),
            active_tab_id=w.get("active_tab_id"),
            next_tab=w["next_tab"],
            next_pane=w["next_pane"],
        )
        for t in w.get("tabs", []):
            tab = Tab(
                tab_id=t["tab_id"],
                workspace_id=ws.workspace_id,
                number=t["number"],
                custom_label=t.get("custom_label"),
                focused_pane_id=t.get("focused_pane_id"),
            )
            for p in t.get("panes", []):
                tab.panes.append(
                    Pane(
                        pane_id=p["pane_id"],
                        workspace_id=ws.workspace_id,
                        tab_id=tab.tab_id,
                        number=p["number"],
                        cwd=p["cwd"],
                        label=p.get("label"),
                        launch_argv=p.get("launch_argv"),
                        agent=p.get("agent"),
                        agent_session=p.get("agent_session"),
                        resume_argv=p.get("resume_argv"),
                    )
                )
            ws.tabs.append(tab)
        out.append(ws)
    return out, doc.get("focused_workspace_id")
