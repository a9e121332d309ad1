"""Handlers of agent reports, ``agent.*`` and ``events.subscribe`` (see :mod:`handlers`)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from orcr_testing.herdr import droprule
from orcr_testing.herdr.api_util import CONTROL as _CONTROL
from orcr_testing.herdr.api_util import OK
from orcr_testing.herdr.events import TYPE_ONLY, OutputEntry, QuietEntry, StatusEntry, TypeEntry
from orcr_testing.herdr.model import DETECTED, OFFICIAL_SOURCES, REPLACE_DEFAULT, REPLACE_SOURCES
from orcr_testing.herdr.pane_handlers import pane_read
from orcr_testing.herdr.replies import Stream
from orcr_testing.herdr.transport import ApiError

if TYPE_CHECKING:
    from orcr_testing.herdr.emulator import Emulator


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
    emu.state.mark_dirty()  # no event: clients poll


RESUME_MAX_ITEMS, RESUME_MAX_BYTES = 64, 8192


def _resume_argv(emu: Emulator, params: dict) -> list[str] | None:
    """0.9.2's ``resume_argv``, checked before anything of the report is applied
    (HERDR-0.9.md §8.2); None when absent, and on 0.8, which ignores the field."""
    argv = params.get("resume_argv")
    if argv is None or not emu.dialect.resume_argv:
        return None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        why = "it must be an array of strings, a command first"
    elif len(argv) > RESUME_MAX_ITEMS:
        why = f"at most {RESUME_MAX_ITEMS} elements"
    elif sum(len(a.encode()) for a in argv) > RESUME_MAX_BYTES:
        why = f"at most {RESUME_MAX_BYTES} bytes in total"
    elif not argv[0] or "/" in argv[0]:
        why = "its first element must be a plain command name, not a path"
    elif any("'" in a or _CONTROL.search(a) for a in argv):
        why = "no element may contain an apostrophe or a control character"
    else:
        return list(argv)
    raise ApiError("invalid_resume_argv", f"invalid resume_argv: {why}")


def _holds(pane, source: str, agent: str) -> bool:
    """Whether ``source``/``agent`` hold the pane: an official pair while herdr sees that
    agent there; a custom source once its ``pane.report_agent`` made it the authority."""
    if OFFICIAL_SOURCES.get(source) == agent:
        return pane.agent == agent
    return pane.agent_authority == source and pane.agent == agent


def _attach(emu: Emulator, pane, source: str, agent: str, argv: list[str]) -> None:
    pane.resume_argv = {"source": source, "agent": agent, "argv": argv}
    emu.state.mark_dirty()  # saved with the session: used by the next cold restart


def pane_report_agent_session(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"])
    source, agent = params["source"], params["agent"]
    argv = _resume_argv(emu, params)
    if argv is not None and not _holds(pane, source, agent):
        raise ApiError(
            "resume_not_accepted",
            f"{source}/{agent} does not hold pane {pane.pane_id}: report it with "
            "pane.report_agent before attaching a resume command",
        )
    _store_session(emu, pane, params)
    if argv is not None:
        _attach(emu, pane, source, agent, argv)
    return OK


def pane_report_agent(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"])
    source, agent = params["source"], params["agent"]
    argv = _resume_argv(emu, params)
    if OFFICIAL_SOURCES.get(source) == agent:
        if argv is not None and not _holds(pane, source, agent):
            raise ApiError("resume_not_accepted", f"{agent} does not run in {pane.pane_id}")
        _store_session(emu, pane, params)  # reserved pairs: state ignored
        if argv is not None:
            _attach(emu, pane, source, agent, argv)
        return OK
    seq = params.get("seq")
    if seq is not None:
        if seq <= pane.session_seq.get(source, -1):
            return OK
        pane.session_seq[source] = seq
    pane.agent_authority = source
    emu.state.set_agent(pane, agent, params["state"])
    droprule.registered(emu, pane)  # 0.9.2: dropped if the pane's shell is in front
    if argv is not None:  # the report made this source the pane's holder
        _attach(emu, pane, source, agent, argv)
    return OK


def pane_release_agent(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"])
    if pane.agent_authority == params["source"] and pane.agent == params["agent"]:
        pane.agent_authority = None
        emu.state.set_agent(pane, None, "unknown")
    return OK


def pane_clear_agent_authority(emu: Emulator, params: dict, rid: str) -> dict:
    pane = emu.state.find_pane(params["pane_id"])
    source = params.get("source")
    if pane.agent_authority not in (None, "detect") and source in (None, pane.agent_authority):
        pane.agent_authority = None
        emu.state.set_agent(pane, None, "unknown")
    return OK


def pane_report_metadata(emu: Emulator, params: dict, rid: str) -> dict:
    emu.state.find_pane(params["pane_id"])
    return OK


# ---------------------------------------------------------------- agents
def _agent_pane(emu: Emulator, target: str):
    try:
        pane = emu.state.find_pane(target)
    except ApiError:
        raise ApiError("agent_not_found", f"agent {target} not found") from None
    if not pane.agent:
        raise ApiError("agent_not_found", f"pane {target} hosts no agent")
    return pane


def agent_list(emu: Emulator, params: dict, rid: str) -> dict:
    panes = [p for ws in emu.state.workspaces.values() for p in ws.panes() if p.agent]
    return {"type": "agent_list", "agents": [emu.state.views.agent(p) for p in panes]}


def agent_get(emu: Emulator, params: dict, rid: str) -> dict:
    return {
        "type": "agent_info",
        "agent": emu.state.views.agent(_agent_pane(emu, params["target"])),
    }


def agent_focus(emu: Emulator, params: dict, rid: str) -> dict:
    pane = _agent_pane(emu, params["target"])
    emu.state.focus_pane(pane)
    return {"type": "agent_info", "agent": emu.state.views.agent(pane)}


# ---------------------------------------------------------------- events
def events_subscribe(emu: Emulator, params: dict, rid: str) -> Stream:
    if emu.serving.subscribe_changes:  # a test's change just before this subscription starts
        emu.serving.subscribe_changes.pop(0)()
    entries: list = []
    for index, sub in enumerate(params["subscriptions"]):
        kind = sub["type"]
        if kind in TYPE_ONLY:
            entries.append(TypeEntry(emu.state.hub, kind, live_edge=emu.dialect.live_edge))
            continue
        # 0.8 answers with its internal probe id; whether 0.9.2's id fix covers this
        # is not documented (HERDR-0.9.md §12): the 0.9 dialect echoes the request's
        probe_id = rid if emu.dialect.error_ids else f"{rid}:sub:{index}:probe"
        try:
            pane = emu.state.find_pane(sub["pane_id"])
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
    with emu.state.hub.lock:
        emu.state.hub.status_entries.extend(e for e in entries if isinstance(e, StatusEntry))
    return Stream(entries, rid)


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
                emu.state.find_pane(pane_id, live=True)
            except ApiError:
                return None
            read = pane_read(
                emu, {"pane_id": pane_id, "source": sub["source"], "lines": sub.get("lines")}, ""
            )
        line = next((ln for ln in read["read"]["text"].split("\n") if hit(ln)), None)
        return line, read["read"]

    return probe
