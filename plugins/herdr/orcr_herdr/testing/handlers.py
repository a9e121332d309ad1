"""One function per herdr method: ``handler(emu, params, request_id) -> result``.

Handlers run under the emulator's lock (herdr's app loop), except ``ping``.
They raise :class:`ApiError` for error replies. Methods herdr has but the
emulator does not model answer ``not_implemented``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import psutil

from orcr_herdr.testing.emulator import Emulator, Stream
from orcr_herdr.testing.events import TYPE_ONLY, OutputEntry, QuietEntry, StatusEntry, TypeEntry
from orcr_herdr.testing.ids import encode_number
from orcr_herdr.testing.keys import InvalidKey, encode_keys
from orcr_herdr.testing.model import DETECTED, OFFICIAL_SOURCES, REPLACE_DEFAULT, REPLACE_SOURCES
from orcr_herdr.testing.transport import ApiError

OK = {"type": "ok"}
MAX_LAYOUT_PANES, MAX_LAYOUT_DEPTH = 24, 16
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _env(env: Any) -> dict[str, str]:
    env = env or {}
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ApiError("invalid_env", f"invalid environment variable {key!r}")
    return dict(env)


def _cwd(emu: Emulator, cwd: str | None) -> str:
    if cwd:
        return cwd
    if emu.focused_ws in emu.workspaces:
        return emu.workspaces[emu.focused_ws].cwd
    return os.getcwd()


def _tab(emu: Emulator, tab_id: str):
    tab = emu.find_tab(tab_id)
    if tab is None:
        raise ApiError("tab_not_found", f"tab {tab_id} not found")
    return tab


# ---------------------------------------------------------------- server, session
def ping(emu: Emulator, params: dict, rid: str) -> dict:
    daemon = os.getsid(0) == os.getpid()
    return {
        "type": "pong",
        "version": emu.version,
        "protocol": emu.protocol,
        "capabilities": {"live_handoff": True, "detached_server_daemon": daemon},
    }


def server_stop(emu: Emulator, params: dict, rid: str) -> dict:
    emu._stop_after_reply.set()
    return OK


def session_snapshot(emu: Emulator, params: dict, rid: str) -> dict:
    v = emu.views
    workspaces = list(emu.workspaces.values())
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
    if emu.focused_ws in emu.workspaces:
        ws = emu.workspaces[emu.focused_ws]
        snap["focused_workspace_id"] = ws.workspace_id
        tab = emu.find_tab(ws.active_tab_id or "")
        if tab is not None:
            snap["focused_tab_id"] = tab.tab_id
            if tab.focused_pane_id:
                snap["focused_pane_id"] = tab.focused_pane_id
    return {"type": "session_snapshot", "snapshot": snap}


# ---------------------------------------------------------------- workspaces
def workspace_create(emu: Emulator, params: dict, rid: str) -> dict:
    label = (params.get("label") or "").strip() or None
    ws, tab, pane = emu.new_workspace(
        _cwd(emu, params.get("cwd")), label, _env(params.get("env")), params.get("focus", False)
    )
    return {
        "type": "workspace_created",
        "workspace": emu.views.workspace(ws),
        "tab": emu.views.tab(tab),
        "root_pane": emu.views.pane(pane),
    }


def workspace_list(emu: Emulator, params: dict, rid: str) -> dict:
    return {
        "type": "workspace_list",
        "workspaces": [emu.views.workspace(ws) for ws in emu.workspaces.values()],
    }


def workspace_get(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.find_workspace(params["workspace_id"])
    return {"type": "workspace_info", "workspace": emu.views.workspace(ws)}


def workspace_focus(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.find_workspace(params["workspace_id"])
    tab = emu.find_tab(ws.active_tab_id or "")
    if tab is not None and tab.focused_pane_id:
        emu.focus_pane(emu.find_pane(tab.focused_pane_id))
    return {"type": "workspace_info", "workspace": emu.views.workspace(ws)}


def workspace_rename(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.find_workspace(params["workspace_id"])
    ws.custom_label = (params.get("label") or "").strip() or None
    emu._emit("workspace_renamed", {"workspace_id": ws.workspace_id, "label": ws.label})
    emu._mark_dirty()
    return {"type": "workspace_info", "workspace": emu.views.workspace(ws)}


def workspace_close(emu: Emulator, params: dict, rid: str) -> dict:
    emu.close_workspace(emu.find_workspace(params["workspace_id"]))
    return OK


# ---------------------------------------------------------------- tabs
def tab_create(emu: Emulator, params: dict, rid: str) -> dict:
    ws = emu.find_workspace(params.get("workspace_id"))
    env = _env(params.get("env"))
    tab = emu.new_tab(ws, (params.get("label") or "").strip() or None)
    try:
        pane = emu.new_pane(ws, tab, params.get("cwd") or ws.cwd, None, env, None)
    except ApiError as err:
        emu._forget_tab(ws, tab)
        raise ApiError("tab_create_failed", err.message) from None
    emu._emit("tab_created", {"tab": emu.views.tab(tab)})
    emu._emit("pane_created", {"pane": emu.views.pane(pane)})
    emu._emit("layout_updated", {"layout": emu.views.layout(tab)})
    if params.get("focus"):
        emu.focus_pane(pane)
    emu._mark_dirty()
    return {"type": "tab_created", "tab": emu.views.tab(tab), "root_pane": emu.views.pane(pane)}


def tab_list(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("workspace_id"):
        workspaces = [emu.find_workspace(params["workspace_id"])]
    else:
        workspaces = list(emu.workspaces.values())
    return {"type": "tab_list", "tabs": [emu.views.tab(t) for ws in workspaces for t in ws.tabs]}


def tab_get(emu: Emulator, params: dict, rid: str) -> dict:
    return {"type": "tab_info", "tab": emu.views.tab(_tab(emu, params["tab_id"]))}


def tab_focus(emu: Emulator, params: dict, rid: str) -> dict:
    tab = _tab(emu, params["tab_id"])
    if tab.focused_pane_id:
        emu.focus_pane(emu.find_pane(tab.focused_pane_id))
    return {"type": "tab_info", "tab": emu.views.tab(tab)}


def tab_rename(emu: Emulator, params: dict, rid: str) -> dict:
    tab = _tab(emu, params["tab_id"])
    tab.custom_label = (params.get("label") or "").strip() or None
    data = {"tab_id": tab.tab_id, "workspace_id": tab.workspace_id, "label": tab.label}
    emu._emit("tab_renamed", data)
    emu._mark_dirty()
    return {"type": "tab_info", "tab": emu.views.tab(tab)}


def tab_close(emu: Emulator, params: dict, rid: str) -> dict:
    emu.close_tab(_tab(emu, params["tab_id"]))
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
    ws = emu.workspaces[old_tab.workspace_id] if old_tab else None
    ws = ws or emu.find_workspace(params.get("workspace_id"))
    label = params.get("tab_label")
    tab = emu.new_tab(ws, (label or "").strip() or (old_tab.custom_label if old_tab else None))
    made: dict[int, Any] = {}
    try:
        for node in nodes:
            pane_label = (node.get("label") or "").strip() or None
            cwd = node.get("cwd") or ws.cwd
            made[id(node)] = emu.new_pane(
                ws, tab, cwd, node.get("command"), node.get("env"), pane_label
            )
    except ApiError as err:
        for pane in made.values():
            emu._drop_pane(pane)
        emu._forget_tab(ws, tab)
        raise ApiError("layout_apply_failed", err.message) from None
    if old_tab is not None:
        emu.close_tab(old_tab)
    emu._emit("tab_created", {"tab": emu.views.tab(tab)})
    for pane in tab.panes:
        emu._emit("pane_created", {"pane": emu.views.pane(pane)})
    emu._emit("layout_updated", {"layout": emu.views.layout(tab)})
    if params.get("focus"):
        emu.focus_pane(tab.panes[0])
    emu._mark_dirty()
    layout = {
        "workspace_id": ws.workspace_id,
        "tab_id": tab.tab_id,
        "zoomed": False,
        "focused_pane_id": tab.focused_pane_id or "",
        "root": _describe(root, made),
    }
    return {"type": "layout_apply", "layout": layout}


# ---------------------------------------------------------------- panes
def pane_split(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("target_pane_id"):
        target = emu.find_pane(params["target_pane_id"])
        ws = emu.workspaces[target.workspace_id]
        tab = emu.find_tab(target.tab_id)
    else:
        ws = emu.find_workspace(params.get("workspace_id"))
        tab = emu.find_tab(ws.active_tab_id or "")
    if tab is None:
        raise ApiError("pane_split_failed", "no tab to split")
    try:
        pane = emu.new_pane(
            ws, tab, params.get("cwd") or ws.cwd, None, _env(params.get("env")), None
        )
    except ApiError as err:
        raise ApiError("pane_split_failed", err.message) from None
    emu._emit("pane_created", {"pane": emu.views.pane(pane)})
    emu._emit("layout_updated", {"layout": emu.views.layout(tab)})
    if params.get("focus"):
        emu.focus_pane(pane)
    emu._mark_dirty()
    return {"type": "pane_info", "pane": emu.views.pane(pane)}


def pane_list(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("workspace_id"):
        workspaces = [emu.find_workspace(params["workspace_id"])]
    else:
        workspaces = list(emu.workspaces.values())
    return {
        "type": "pane_list",
        "panes": [emu.views.pane(p) for ws in workspaces for p in ws.panes()],
    }


def pane_get(emu: Emulator, params: dict, rid: str) -> dict:
    return {"type": "pane_info", "pane": emu.views.pane(emu.find_pane(params["pane_id"]))}


def pane_current(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("caller_pane_id"):
        pane = emu.find_pane(params["caller_pane_id"])
    else:
        ws = emu.find_workspace(None)
        tab = emu.find_tab(ws.active_tab_id or "")
        if tab is None or not tab.focused_pane_id:
            raise ApiError("no_active_pane", "no active pane")
        pane = emu.find_pane(tab.focused_pane_id)
    return {"type": "pane_current", "pane": emu.views.pane(pane)}


def pane_focus(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"])
    emu.focus_pane(pane)
    return {"type": "pane_info", "pane": emu.views.pane(pane)}


def pane_rename(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"])
    pane.label = (params.get("label") or "").strip() or None  # no event, not even pane_updated
    emu._mark_dirty()
    return {"type": "pane_info", "pane": emu.views.pane(pane)}


def pane_read(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"], live=True)
    source = params["source"]
    text, truncated = emu._read_text(pane, source, params.get("lines"))
    read = {
        "pane_id": pane.pane_id,
        "workspace_id": pane.workspace_id,
        "tab_id": pane.tab_id,
        "source": source,
        "format": params.get("format") or "text",
        "text": text,
        "revision": 0,
        "truncated": truncated,
    }
    return {"type": "pane_read", "read": read}


def _key_segments(keys: list[str]) -> list[tuple[str, bytes]]:
    try:
        encoded = encode_keys(keys)
    except InvalidKey as exc:
        raise ApiError("invalid_key", str(exc)) from None
    out = []
    for name, data in zip(keys, encoded, strict=True):
        if name.lower() in ("enter", "return"):
            out.append(("enter", data))
        elif len(name) == 1 and name.isprintable():
            out.append(("text", data))
        else:
            out.append(("key", data))
    return out


def _text_segments(text: str) -> list[tuple[str, bytes]]:
    out = []
    for part in re.split(r"(\r)", text):
        if part == "\r":
            out.append(("enter", b"\r"))
        elif part:
            out.append(("text", part.encode()))
    return out


def pane_send_text(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"], live=True)
    emu.deliver(pane, "pane.send_text", _text_segments(params["text"]))  # raw, never a paste
    return OK


def pane_send_keys(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"], live=True)
    emu.deliver(pane, "pane.send_keys", _key_segments(params["keys"]))
    return OK


def pane_send_input(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"], live=True)
    keys = _key_segments(params.get("keys") or [])
    segments: list[tuple[str, bytes]] = []
    text = params.get("text")
    if text:
        data = text.encode()
        if pane.proc is not None and pane.proc.bracketed_paste:
            data = b"\x1b[200~" + data + b"\x1b[201~"
            segments.append(("text", data))
        else:
            segments.extend(_text_segments(text))
    emu.deliver(pane, "pane.send_input", segments + keys)  # all in ONE write
    return OK


def pane_close(emu: Emulator, params: dict, rid: str) -> dict:
    emu._remove_pane(emu.find_pane(params["pane_id"]), exited=False)
    return OK


def pane_move(emu: Emulator, params: dict, rid: str) -> dict:
    """A running pane to another tab, a new tab or a new workspace (socket-api
    "pane.move"). The terminal (process, label, input history) goes with it; in
    another workspace it gets that workspace's next pane id. An emptied source
    tab, then workspace, closes; no pane close/create events, one ``pane_moved``."""
    from orcr_herdr.testing.model import Workspace

    pane = emu.find_pane(params["pane_id"])
    dest = params["destination"]
    src_ws = emu.workspaces[pane.workspace_id]
    src_tab = emu.find_tab(pane.tab_id)
    assert src_tab is not None
    previous = {
        "previous_pane_id": pane.pane_id,
        "previous_workspace_id": pane.workspace_id,
        "previous_tab_id": pane.tab_id,
    }
    created_ws = created_tab = None
    target = _tab(emu, dest["tab_id"]) if dest["type"] == "tab" else None
    if src_tab.zoomed or (target is not None and target.zoomed):
        return {
            "type": "pane_move",
            "move_result": {
                "changed": False,
                "reason": "zoomed_tab",
                **previous,
                "pane": emu.views.pane(pane),
                "target_layout": emu.views.layout(target or src_tab),
                "focused_pane_id": (target or src_tab).focused_pane_id or "",
            },
        }
    if dest["type"] == "tab":
        tab = _tab(emu, dest["tab_id"])
        ws = emu.workspaces[tab.workspace_id]
        if tab is src_tab:
            return {
                "type": "pane_move",
                "move_result": {
                    "changed": False,
                    "reason": "same_tab",
                    **previous,
                    "pane": emu.views.pane(pane),
                    "target_layout": emu.views.layout(tab),
                    "focused_pane_id": tab.focused_pane_id or "",
                },
            }
    elif dest["type"] == "new_tab":
        ws = emu.find_workspace(dest.get("workspace_id"))
        tab = created_tab = emu.new_tab(ws, (dest.get("label") or "").strip() or None)
    else:  # new_workspace
        ws_id = f"w{encode_number(emu.next_ws)}"
        label = (dest.get("label") or "").strip() or None
        ws = created_ws = Workspace(ws_id, emu.next_ws, pane.cwd, custom_label=label)
        emu.next_ws += 1
        emu.workspaces[ws_id] = ws
        tab = created_tab = emu.new_tab(ws, (dest.get("tab_label") or "").strip() or None)
    src_tab.panes.remove(pane)
    if src_tab.focused_pane_id == pane.pane_id:
        src_tab.focused_pane_id = src_tab.panes[0].pane_id if src_tab.panes else None
    if ws is not src_ws:
        new_id = f"{ws.workspace_id}:p{encode_number(ws.next_pane)}"
        if pane.pane_id in emu._resume_at:
            emu._resume_at[new_id] = emu._resume_at.pop(pane.pane_id)
        pane.pane_id, pane.number = new_id, ws.next_pane
        ws.next_pane += 1
    pane.workspace_id, pane.tab_id = ws.workspace_id, tab.tab_id
    tab.panes.append(pane)
    if tab.focused_pane_id is None:
        tab.focused_pane_id = pane.pane_id
    closed: dict[str, Any] = {}
    source_layout = None
    if not src_tab.panes:
        emu._forget_tab(src_ws, src_tab)
        closed["closed_tab_id"] = src_tab.tab_id
        if not src_ws.tabs:
            emu._forget_workspace(src_ws)
            closed["closed_workspace_id"] = src_ws.workspace_id
    else:
        source_layout = emu.views.layout(src_tab)
    if params.get("focus"):
        emu.focus_pane(pane)
    extra: dict[str, Any] = dict(closed)
    if created_ws is not None:
        extra["created_workspace"] = emu.views.workspace(created_ws)
    if created_tab is not None:
        extra["created_tab"] = emu.views.tab(created_tab)
    emu._emit("pane_moved", {**previous, "pane": emu.views.pane(pane), **extra})
    emu._mark_dirty()
    result = {
        "changed": True,
        **previous,
        "pane": emu.views.pane(pane),
        "target_layout": emu.views.layout(tab),
        "focused_pane_id": tab.focused_pane_id or "",
        **extra,
    }
    if source_layout is not None:
        result["source_layout"] = source_layout
    return {"type": "pane_move", "move_result": result}


def pane_process_info(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params.get("pane_id") or "", live=True)
    info: dict[str, Any] = {"pane_id": pane.pane_id, "foreground_processes": []}
    proc = pane.proc
    if proc is not None:
        info["shell_pid"] = proc.pid
        info["tty"] = proc.tty
        pgid = proc.foreground_pgid()
        info["foreground_process_group_id"] = pgid
        try:
            for p in psutil.process_iter(["pid", "name", "cmdline", "cwd"]):
                if pgid is not None and _pgid(p.info["pid"]) == pgid:
                    argv = p.info["cmdline"] or []
                    item = {"pid": p.info["pid"], "name": p.info["name"] or ""}
                    if argv:
                        item.update(argv0=argv[0], argv=argv, cmdline=" ".join(argv))
                    if p.info["cwd"]:
                        item["cwd"] = p.info["cwd"]
                    info["foreground_processes"].append(item)
        except (OSError, psutil.Error):
            pass
    info = {k: v for k, v in info.items() if v is not None}
    return {"type": "pane_process_info", "process_info": info}


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


# ---------------------------------------------------------------- agent reports
def _store_session(emu: Emulator, pane, params: dict) -> None:
    """``src/agent_resume.rs`` rules: official pairs only, seq increasing, guarded replace."""
    source, agent = params["source"], params["agent"]
    if OFFICIAL_SOURCES.get(source) != agent:
        return
    seq = params.get("seq")
    if seq is not None:
        if seq <= pane.session_seq.get(source, -1):
            return
        pane.session_seq[source] = seq
    if pane.agent in DETECTED.values() and pane.agent != agent:
        return  # contradicts the detected process
    sid, path = params.get("agent_session_id"), params.get("agent_session_path")
    if agent in ("pi", "omp") and path and os.path.isabs(path):
        kind, value = "path", path
    elif sid:
        kind, value = "id", sid
    else:
        return
    if len(value) > 512 or _CONTROL.search(value):
        return
    old = pane.agent_session
    if old and old["source"] == source and old["value"] != value:
        allowed = REPLACE_SOURCES.get(agent, REPLACE_DEFAULT)
        if params.get("session_start_source") not in allowed:
            return
    pane.agent_session = {"source": source, "agent": agent, "kind": kind, "value": value}
    emu._mark_dirty()  # no event: clients poll


def pane_report_agent_session(emu: Emulator, params: dict, rid: str) -> dict:
    _store_session(emu, emu.find_pane(params["pane_id"]), params)
    return OK


def pane_report_agent(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"])
    source, agent = params["source"], params["agent"]
    if OFFICIAL_SOURCES.get(source) == agent:
        _store_session(emu, pane, params)  # reserved pairs: state ignored
        return OK
    seq = params.get("seq")
    if seq is not None:
        if seq <= pane.session_seq.get(source, -1):
            return OK
        pane.session_seq[source] = seq
    pane.agent_authority = source
    emu._set_agent(pane, agent, params["state"])
    return OK


def pane_release_agent(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"])
    if pane.agent_authority == params["source"] and pane.agent == params["agent"]:
        pane.agent_authority = None
        emu._set_agent(pane, None, "unknown")
    return OK


def pane_clear_agent_authority(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.find_pane(params["pane_id"])
    source = params.get("source")
    if pane.agent_authority not in (None, "detect") and source in (None, pane.agent_authority):
        pane.agent_authority = None
        emu._set_agent(pane, None, "unknown")
    return OK


def pane_report_metadata(emu: Emulator, params: dict, rid: str) -> dict:
    emu.find_pane(params["pane_id"])
    return OK


# ---------------------------------------------------------------- agents
def _agent_pane(emu: Emulator, target: str):
    try:
        pane = emu.find_pane(target)
    except ApiError:
        raise ApiError("agent_not_found", f"agent {target} not found") from None
    if not pane.agent:
        raise ApiError("agent_not_found", f"pane {target} hosts no agent")
    return pane


def agent_list(emu: Emulator, params: dict, rid: str) -> dict:
    panes = [p for ws in emu.workspaces.values() for p in ws.panes() if p.agent]
    return {"type": "agent_list", "agents": [emu.views.agent(p) for p in panes]}


def agent_get(emu: Emulator, params: dict, rid: str) -> dict:
    return {"type": "agent_info", "agent": emu.views.agent(_agent_pane(emu, params["target"]))}


def agent_focus(emu: Emulator, params: dict, rid: str) -> dict:
    pane = _agent_pane(emu, params["target"])
    emu.focus_pane(pane)
    return {"type": "agent_info", "agent": emu.views.agent(pane)}


# ---------------------------------------------------------------- events
def events_subscribe(emu: Emulator, params: dict, rid: str) -> Stream:
    entries: list = []
    for index, sub in enumerate(params["subscriptions"]):
        kind = sub["type"]
        if kind in TYPE_ONLY:
            entries.append(TypeEntry(emu.hub, kind))
            continue
        probe_id = f"{rid}:sub:{index}:probe"
        try:
            pane = emu.find_pane(sub["pane_id"])
        except ApiError as err:
            raise ApiError(err.code, err.message, reply_id=probe_id) from None
        if kind == "pane.agent_status_changed":
            entry = StatusEntry(pane.pane_id, sub.get("agent_status"))
            if entry.status is not None and pane.agent_status == entry.status:
                payload = {
                    "pane_id": pane.pane_id,
                    "workspace_id": pane.workspace_id,
                    "agent_status": pane.agent_status,
                }
                if pane.agent:
                    payload["agent"] = pane.agent
                entry.offer(pane.agent_status, payload)
            entries.append(entry)
        elif kind == "pane.output_matched":
            entries.append(OutputEntry(pane.pane_id, _output_probe(emu, pane.pane_id, sub)))
        else:
            entries.append(QuietEntry())
    with emu.hub.lock:
        emu.hub.status_entries.extend(e for e in entries if isinstance(e, StatusEntry))
    return Stream(entries)


def _output_probe(emu: Emulator, pane_id: str, sub: dict):
    match = sub["match"]
    if match["type"] == "regex":
        try:
            pattern = re.compile(match["value"])
        except re.error as exc:
            raise ApiError("invalid_regex", f"invalid regex: {exc}") from None

        def hit(line: str) -> bool:
            return bool(pattern.search(line))
    else:

        def hit(line: str) -> bool:
            return match["value"] in line

    def probe():
        with emu.lock:
            try:
                emu.find_pane(pane_id, live=True)
            except ApiError:
                return None
            read = pane_read(
                emu, {"pane_id": pane_id, "source": sub["source"], "lines": sub.get("lines")}, ""
            )
        line = next((ln for ln in read["read"]["text"].split("\n") if hit(ln)), None)
        return line, read["read"]

    return probe


HANDLERS = {
    "ping": ping,
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
    "pane.split": pane_split,
    "pane.list": pane_list,
    "pane.get": pane_get,
    "pane.current": pane_current,
    "pane.focus": pane_focus,
    "pane.rename": pane_rename,
    "pane.read": pane_read,
    "pane.send_text": pane_send_text,
    "pane.send_keys": pane_send_keys,
    "pane.send_input": pane_send_input,
    "pane.close": pane_close,
    "pane.move": pane_move,
    "pane.process_info": pane_process_info,
    "pane.report_agent_session": pane_report_agent_session,
    "pane.report_agent": pane_report_agent,
    "pane.release_agent": pane_release_agent,
    "pane.clear_agent_authority": pane_clear_agent_authority,
    "pane.report_metadata": pane_report_metadata,
    "agent.list": agent_list,
    "agent.get": agent_get,
    "agent.focus": agent_focus,
    "events.subscribe": events_subscribe,
}


def _register_waits() -> None:
    from orcr_herdr.testing.waits import WAIT_HANDLERS

    HANDLERS.update(WAIT_HANDLERS)


_register_waits()
