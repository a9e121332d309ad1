"""One function per herdr method: ``handler(emu, params, request_id) -> result``.

Handlers run under the emulator's lock (herdr's app loop), except ``ping``.
They raise :class:`ApiError` for error replies. Methods herdr has but the
emulator does not model answer ``not_implemented``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from orcr_testing.herdr import agent_handlers as agents
from orcr_testing.herdr import pane_handlers as panes
from orcr_testing.herdr.api_util import OK, _cwd, _env, _tab
from orcr_testing.herdr.transport import ApiError

if TYPE_CHECKING:
    from orcr_testing.herdr.emulator import Emulator

MAX_LAYOUT_PANES, MAX_LAYOUT_DEPTH = 24, 16


# ---------------------------------------------------------------- server, session
def ping(emu: Emulator, params: dict, rid: str) -> dict:
    daemon = os.getsid(0) == os.getpid()
    return {
        "type": "pong",
        "version": emu.version,
        "protocol": emu.protocol,
        "capabilities": {**emu.dialect.capabilities, "detached_server_daemon": daemon},
    }


def server_stop(emu: Emulator, params: dict, rid: str) -> dict:
    emu.serving.stop_after_reply.set()
    return OK


def session_snapshot(emu: Emulator, params: dict, rid: str) -> dict:
    v = emu.state.views
    workspaces = list(emu.state.workspaces.values())
    tabs = [t for ws in workspaces for t in ws.tabs]
    panes = [p for t in tabs for p in t.panes]
    snap: dict[str, Any] = {
        "version": emu.version,
        "protocol": emu.protocol,
        "workspaces": [v.workspace(ws) for ws in workspaces],
        "tabs": [v.tab(t) for t in tabs],
        "panes": [v.pane(p) for p in panes],
        "layouts": [v.layout(t) for t in tabs],
        "agents": [v.agent(p) for p in panes if p.agent],
    }
    if emu.state.focused_ws in emu.state.workspaces:
        ws = emu.state.workspaces[emu.state.focused_ws]
        snap["focused_workspace_id"] = ws.workspace_id
        tab = emu.state.find_tab(ws.active_tab_id or "")
        if tab is not None:
            snap["focused_tab_id"] = tab.tab_id
            if tab.focused_pane_id:
                snap["focused_pane_id"] = tab.focused_pane_id
    return {"type": "session_snapshot", "snapshot": snap}


# ---------------------------------------------------------------- workspaces
def workspace_create(emu: Emulator, params: dict, rid: str) -> dict:
    label = (params.get("label") or "").strip() or None
    ws, tab, pane = emu.state.new_workspace(
        _cwd(emu, params.get("cwd")), label, _env(params.get("env")), params.get("focus", False)
    )
    return {
        "type": "workspace_created",
        "workspace": emu.state.views.workspace(ws),
        "tab": emu.state.views.tab(tab),
        "root_pane": emu.state.views.pane(pane),
    }


def workspace_list(emu: Emulator, params: dict, rid: str) -> dict:
    return {
        "type": "workspace_list",
        "workspaces": [emu.state.views.workspace(ws) for ws in emu.state.workspaces.values()],
    }


def workspace_get(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.state.find_workspace(params["workspace_id"])
    return {"type": "workspace_info", "workspace": emu.state.views.workspace(ws)}


def workspace_focus(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.state.find_workspace(params["workspace_id"])
    tab = emu.state.find_tab(ws.active_tab_id or "")
    if tab is not None and tab.focused_pane_id:
        emu.state.focus_pane(emu.state.find_pane(tab.focused_pane_id))
    return {"type": "workspace_info", "workspace": emu.state.views.workspace(ws)}


def workspace_rename(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.state.find_workspace(params["workspace_id"])
    ws.custom_label = (params.get("label") or "").strip() or None
    emu.state.emit("workspace_renamed", {"workspace_id": ws.workspace_id, "label": ws.label})
    emu.state.mark_dirty()
    return {"type": "workspace_info", "workspace": emu.state.views.workspace(ws)}


def workspace_close(emu: Emulator, params: dict, rid: str) -> dict:
    emu.state.close_workspace(emu.state.find_workspace(params["workspace_id"]))
    return OK


# ---------------------------------------------------------------- tabs
def tab_create(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.state.find_workspace(params.get("workspace_id"))
    env = _env(params.get("env"))
    tab = emu.state.new_tab(ws, (params.get("label") or "").strip() or None)
    try:
        pane = emu.state.new_pane(ws, tab, params.get("cwd") or ws.cwd, None, env, None)
    except ApiError as err:
        emu.state.forget_tab(ws, tab)
        raise ApiError("tab_create_failed", err.message) from None
    emu.state.emit("tab_created", {"tab": emu.state.views.tab(tab)})
    emu.state.emit("pane_created", {"pane": emu.state.views.pane(pane)})
    emu.state.emit("layout_updated", {"layout": emu.state.views.layout(tab)})
    if params.get("focus"):
        emu.state.focus_pane(pane)
    emu.state.mark_dirty()
    return {
        "type": "tab_created",
        "tab": emu.state.views.tab(tab),
        "root_pane": emu.state.views.pane(pane),
    }


def tab_list(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("workspace_id"):
        workspaces = [emu.state.find_workspace(params["workspace_id"])]
    else:
        workspaces = list(emu.state.workspaces.values())
    return {
        "type": "tab_list",
        "tabs": [emu.state.views.tab(t) for ws in workspaces for t in ws.tabs],
    }


def tab_get(emu: Emulator, params: dict, rid: str) -> dict:
    return {"type": "tab_info", "tab": emu.state.views.tab(_tab(emu, params["tab_id"]))}


def tab_focus(emu: Emulator, params: dict, rid: str) -> dict:
    tab = _tab(emu, params["tab_id"])
    if tab.focused_pane_id:
        emu.state.focus_pane(emu.state.find_pane(tab.focused_pane_id))
    return {"type": "tab_info", "tab": emu.state.views.tab(tab)}


def tab_rename(emu: Emulator, params: dict, rid: str) -> dict:
    tab = _tab(emu, params["tab_id"])
    tab.custom_label = (params.get("label") or "").strip() or None
    data = {"tab_id": tab.tab_id, "workspace_id": tab.workspace_id, "label": tab.label}
    emu.state.emit("tab_renamed", data)
    emu.state.mark_dirty()
    return {"type": "tab_info", "tab": emu.state.views.tab(tab)}


def tab_close(emu: Emulator, params: dict, rid: str) -> dict:
    emu.state.close_tab(_tab(emu, params["tab_id"]))
    return OK


# ---------------------------------------------------------------- layout.apply
def _layout_panes(node: dict, depth: int, out: list[dict]) -> None:
    if depth > MAX_LAYOUT_DEPTH:
        raise ApiError("invalid_layout", f"layout is deeper than {MAX_LAYOUT_DEPTH}")
    if node["type"] == "split":
        ratio = node["ratio"]
        if not 0 < ratio < 1:
            raise ApiError("invalid_ratio", f"ratio {ratio} must be between 0 and 1")
        _layout_panes(node["first"], depth + 1, out)
        _layout_panes(node["second"], depth + 1, out)
        return
    command = node.get("command")
    if command is not None and (not command or not command[0]):
        raise ApiError("invalid_layout", "pane command must be non-empty")
    _env(node.get("env"))
    out.append(node)
    if len(out) > MAX_LAYOUT_PANES:
        raise ApiError("invalid_layout", f"a layout holds at most {MAX_LAYOUT_PANES} panes")


def _describe(node: dict, made: dict[int, Any]) -> dict:
    if node["type"] == "split":
        return {
            "type": "split",
            "direction": node["direction"],
            "ratio": node["ratio"],
            "first": _describe(node["first"], made),
            "second": _describe(node["second"], made),
        }
    pane = made[id(node)]
    out: dict[str, Any] = {"type": "pane", "pane_id": pane.pane_id, "cwd": pane.cwd}
    if pane.label:
        out["label"] = pane.label
    if pane.launch_argv:
        out["command"] = list(pane.launch_argv)
    return out


def layout_apply(emu: Emulator, params: dict, rid: str) -> dict:
    root = params["root"]
    nodes: list[dict] = []
    _layout_panes(root, 1, nodes)
    old_tab = _tab(emu, params["tab_id"]) if params.get("tab_id") else None
    ws = emu.state.workspaces[old_tab.workspace_id] if old_tab else None
    ws = ws or emu.state.find_workspace(params.get("workspace_id"))
    label = params.get("tab_label")
    tab = emu.state.new_tab(
        ws, (label or "").strip() or (old_tab.custom_label if old_tab else None)
    )
    made: dict[int, Any] = {}
    try:
        for node in nodes:
            pane_label = (node.get("label") or "").strip() or None
            cwd = node.get("cwd") or ws.cwd
            made[id(node)] = emu.state.new_pane(
                ws, tab, cwd, node.get("command"), node.get("env"), pane_label
            )
    except ApiError as err:
        for pane in made.values():
            emu.state.drop_pane(pane)
        emu.state.forget_tab(ws, tab)
        raise ApiError("layout_apply_failed", err.message) from None
    if old_tab is not None:
        emu.state.close_tab(old_tab)
    emu.state.emit("tab_created", {"tab": emu.state.views.tab(tab)})
    for pane in tab.panes:
        emu.state.emit("pane_created", {"pane": emu.state.views.pane(pane)})
    emu.state.emit("layout_updated", {"layout": emu.state.views.layout(tab)})
    if params.get("focus"):
        emu.state.focus_pane(tab.panes[0])
    emu.state.mark_dirty()
    layout = {
        "workspace_id": ws.workspace_id,
        "tab_id": tab.tab_id,
        "zoomed": False,
        "focused_pane_id": tab.focused_pane_id or "",
        "root": _describe(root, made),
    }
    return {"type": "layout_apply", "layout": layout}


def notification_show(emu: Emulator, params: dict, rid: str) -> dict:
    """herdr's toast: text sanitized and trimmed as herdr does (80/240); what was shown
    is kept in ``emu.notifications`` for a test to read."""
    title = " ".join(str(params.get("title") or "").split())[:80]
    if not title:
        raise ApiError("invalid_params", "title must contain visible text")
    body = " ".join(str(params.get("body") or "").split())[:240] or None
    shown = {"title": title, "body": body, "sound": params.get("sound", "none")}
    if params.get("position"):
        shown["position"] = params["position"]
    emu.__dict__.setdefault("notifications", []).append(shown)
    return {"type": "notification_show", "shown": True, "reason": "shown"}


HANDLERS = {
    "ping": ping,
    "notification.show": notification_show,
    "server.stop": server_stop,
    "session.snapshot": session_snapshot,
    "workspace.create": workspace_create,
    "workspace.list": workspace_list,
    "workspace.get": workspace_get,
    "workspace.focus": workspace_focus,
    "workspace.rename": workspace_rename,
    "workspace.close": workspace_close,
    "tab.create": tab_create,
    "tab.list": tab_list,
    "tab.get": tab_get,
    "tab.focus": tab_focus,
    "tab.rename": tab_rename,
    "tab.close": tab_close,
    "layout.apply": layout_apply,
    "pane.split": panes.pane_split,
    "pane.list": panes.pane_list,
    "pane.get": panes.pane_get,
    "pane.current": panes.pane_current,
    "pane.focus": panes.pane_focus,
    "pane.rename": panes.pane_rename,
    "pane.read": panes.pane_read,
    "pane.send_text": panes.pane_send_text,
    "pane.send_keys": panes.pane_send_keys,
    "pane.send_input": panes.pane_send_input,
    "pane.close": panes.pane_close,
    "pane.move": panes.pane_move,
    "pane.process_info": panes.pane_process_info,
    "pane.report_agent_session": agents.pane_report_agent_session,
    "pane.report_agent": agents.pane_report_agent,
    "pane.release_agent": agents.pane_release_agent,
    "pane.clear_agent_authority": agents.pane_clear_agent_authority,
    "pane.report_metadata": agents.pane_report_metadata,
    "agent.list": agents.agent_list,
    "agent.get": agents.agent_get,
    "agent.focus": agents.agent_focus,
    "events.subscribe": agents.events_subscribe,
}


def _register_waits() -> None:
    from orcr_testing.herdr.waits import WAIT_HANDLERS

    HANDLERS.update(WAIT_HANDLERS)
    from orcr_testing.herdr.view_handlers import VIEW_HANDLERS

    HANDLERS.update(VIEW_HANDLERS)


_register_waits()
