"""Handlers of the ``pane.*`` methods that act on one pane (see :mod:`handlers`)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import psutil

from orcr_testing.herdr.api_util import OK, _env, _tab
from orcr_testing.herdr.ids import encode_number
from orcr_testing.herdr.keys import InvalidKey, encode_keys
from orcr_testing.herdr.transport import ApiError

if TYPE_CHECKING:
    from orcr_testing.herdr.emulator import Emulator


# ---------------------------------------------------------------- panes
def pane_split(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("target_pane_id"):
        target = emu.state.find_pane(params["target_pane_id"])
        ws = emu.state.workspaces[target.workspace_id]
        tab = emu.state.find_tab(target.tab_id)
    else:
        ws = emu.state.find_workspace(params.get("workspace_id"))
        tab = emu.state.find_tab(ws.active_tab_id or "")
    if tab is None:
        raise ApiError("pane_split_failed", "no tab to split")
    try:
        pane = emu.state.new_pane(
            ws, tab, params.get("cwd") or ws.cwd, None, _env(params.get("env")), None
        )
    except ApiError as err:
        raise ApiError("pane_split_failed", err.message) from None
    emu.state.emit("pane_created", {"pane": emu.state.views.pane(pane)})
    emu.state.emit("layout_updated", {"layout": emu.state.views.layout(tab)})
    if params.get("focus"):
        emu.state.focus_pane(pane)
    emu.state.mark_dirty()
    return {"type": "pane_info", "pane": emu.state.views.pane(pane)}


def pane_list(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("workspace_id"):
        workspaces = [emu.state.find_workspace(params["workspace_id"])]
    else:
        workspaces = list(emu.state.workspaces.values())
    return {
        "type": "pane_list",
        "panes": [emu.state.views.pane(p) for ws in workspaces for p in ws.panes()],
    }


def pane_get(emu: Emulator, params: dict, rid: str) -> dict:
    return {
        "type": "pane_info",
        "pane": emu.state.views.pane(emu.state.find_pane(params["pane_id"])),
    }


def pane_current(emu: Emulator, params: dict, rid: str) -> dict:
    if params.get("caller_pane_id"):
        pane = emu.state.find_pane(params["caller_pane_id"])
    else:
        ws = emu.state.find_workspace(None)
        tab = emu.state.find_tab(ws.active_tab_id or "")
        if tab is None or not tab.focused_pane_id:
            raise ApiError("no_active_pane", "no active pane")
        pane = emu.state.find_pane(tab.focused_pane_id)
    return {"type": "pane_current", "pane": emu.state.views.pane(pane)}


def pane_focus(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"])
    emu.state.focus_pane(pane)
    return {"type": "pane_info", "pane": emu.state.views.pane(pane)}


def pane_rename(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"])
    pane.label = (params.get("label") or "").strip() or None  # no event, not even pane_updated
    emu.state.mark_dirty()
    return {"type": "pane_info", "pane": emu.state.views.pane(pane)}


def pane_read(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"], live=True)
    source = params["source"]
    text, truncated = emu.state.read_text(pane, source, params.get("lines"))
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
    pane = emu.state.find_pane(params["pane_id"], live=True)
    emu.state.deliver(pane, "pane.send_text", _text_segments(params["text"]))  # raw, never a paste
    return OK


def pane_send_keys(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"], live=True)
    emu.state.deliver(pane, "pane.send_keys", _key_segments(params["keys"]))
    return OK


def pane_send_input(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"], live=True)
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
    emu.state.deliver(pane, "pane.send_input", segments + keys)  # all in ONE write
    return OK


def pane_close(emu: Emulator, params: dict, rid: str) -> dict:
    emu.state.remove_pane(emu.state.find_pane(params["pane_id"]), exited=False)
    return OK


def pane_move(emu: Emulator, params: dict, rid: str) -> dict:
    """A running pane to another tab, a new tab or a new workspace (socket-api
    "pane.move"). The terminal (process, label, input history) goes with it; in
    another workspace it gets that workspace's next pane id. An emptied source
    tab, then workspace, closes; no pane close/create events, one ``pane_moved``."""
    from orcr_testing.herdr.model import Workspace

    pane = emu.state.find_pane(params["pane_id"])
    dest = params["destination"]
    src_ws = emu.state.workspaces[pane.workspace_id]
    src_tab = emu.state.find_tab(pane.tab_id)
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
                "pane": emu.state.views.pane(pane),
                "target_layout": emu.state.views.layout(target or src_tab),
                "focused_pane_id": (target or src_tab).focused_pane_id or "",
            },
        }
    if dest["type"] == "tab":
        tab = _tab(emu, dest["tab_id"])
        ws = emu.state.workspaces[tab.workspace_id]
        if tab is src_tab:
            return {
                "type": "pane_move",
                "move_result": {
                    "changed": False,
                    "reason": "same_tab",
                    **previous,
                    "pane": emu.state.views.pane(pane),
                    "target_layout": emu.state.views.layout(tab),
                    "focused_pane_id": tab.focused_pane_id or "",
                },
            }
    elif dest["type"] == "new_tab":
        ws = emu.state.find_workspace(dest.get("workspace_id"))
        tab = created_tab = emu.state.new_tab(ws, (dest.get("label") or "").strip() or None)
    else:  # new_workspace
        ws_id = f"w{encode_number(emu.state.next_ws)}"
        label = (dest.get("label") or "").strip() or None
        ws = created_ws = Workspace(ws_id, emu.state.next_ws, pane.cwd, custom_label=label)
        emu.state.next_ws += 1
        emu.state.workspaces[ws_id] = ws
        tab = created_tab = emu.state.new_tab(ws, (dest.get("tab_label") or "").strip() or None)
    src_tab.panes.remove(pane)
    if src_tab.focused_pane_id == pane.pane_id:
        src_tab.focused_pane_id = src_tab.panes[0].pane_id if src_tab.panes else None
    if ws is not src_ws:
        new_id = f"{ws.workspace_id}:p{encode_number(ws.next_pane)}"
        if pane.pane_id in emu.state.resume_at:
            emu.state.resume_at[new_id] = emu.state.resume_at.pop(pane.pane_id)
        pane.pane_id, pane.number = new_id, ws.next_pane
        ws.next_pane += 1
    pane.workspace_id, pane.tab_id = ws.workspace_id, tab.tab_id
    tab.panes.append(pane)
    if tab.focused_pane_id is None:
        tab.focused_pane_id = pane.pane_id
    closed: dict[str, Any] = {}
    source_layout = None
    if not src_tab.panes:
        emu.state.forget_tab(src_ws, src_tab)
        closed["closed_tab_id"] = src_tab.tab_id
        if not src_ws.tabs:
            emu.state.forget_workspace(src_ws)
            closed["closed_workspace_id"] = src_ws.workspace_id
    else:
        source_layout = emu.state.views.layout(src_tab)
    if params.get("focus"):
        emu.state.focus_pane(pane)
    extra: dict[str, Any] = dict(closed)
    if created_ws is not None:
        extra["created_workspace"] = emu.state.views.workspace(created_ws)
    if created_tab is not None:
        extra["created_tab"] = emu.state.views.tab(created_tab)
    emu.state.emit("pane_moved", {**previous, "pane": emu.state.views.pane(pane), **extra})
    emu.state.mark_dirty()
    result = {
        "changed": True,
        **previous,
        "pane": emu.state.views.pane(pane),
        "target_layout": emu.state.views.layout(tab),
        "focused_pane_id": tab.focused_pane_id or "",
        **extra,
    }
    if source_layout is not None:
        result["source_layout"] = source_layout
    return {"type": "pane_move", "move_result": result}


def pane_process_info(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params.get("pane_id") or "", live=True)
    info: dict[str, Any] = {"pane_id": pane.pane_id, "foreground_processes": []}
    proc = pane.proc
    if proc is not None:
        info["shell_pid"] = proc.pid
        info["tty"] = proc.tty
        pgid = proc.foreground_pgid()
        info["foreground_process_group_id"] = pgid
        # the group's members first (one getpgid per pid), then their details: reading
        # every process's argv and cwd made each call cost the machine's process count
        for pid in psutil.pids() if pgid is not None else ():
            if _pgid(pid) != pgid:
                continue
            try:
                d = psutil.Process(pid).as_dict(["name", "cmdline", "cwd"])
            except (OSError, psutil.Error):
                continue
            argv = d["cmdline"] or []
            item = {"pid": pid, "name": d["name"] or ""}
            if argv:
                item.update(argv0=argv[0], argv=argv, cmdline=" ".join(argv))
            if d["cwd"]:
                item["cwd"] = d["cwd"]
            info["foreground_processes"].append(item)
    info = {k: v for k, v in info.items() if v is not None}
    return {"type": "pane_process_info", "process_info": info}


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
