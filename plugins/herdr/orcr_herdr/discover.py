"""Unmanaged discovery: the agents herdr detects in the user's other sessions (read-only)."""

from __future__ import annotations

import os

from orcr_core.contracts import DriverError, UnmanagedAgent
from orcr_herdr.client import HerdrClient
from orcr_herdr.marks import parse_marks, pointer
from orcr_herdr.paths import sessions
from orcr_herdr.server import running

#: seconds a discovery read of another session may take: the monitor waits on it
DISCOVER_TIMEOUT = 2.0


def unmanaged(session: str, snap: dict) -> list[UnmanagedAgent]:
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
                agent_session=pointer(p.get("agent_session")),
            )
        )
    return out


def discover(own_session: str, own_socket: str) -> dict[str, list[UnmanagedAgent] | None]:
    """Every session with a socket under herdr's config dir except orcr's own
    (by name and by socket path) gets one ``session.snapshot``. A session
    whose socket is missing or refuses is not running: it is left out (its
    agents are gone). One that does not answer in time, or answers an
    error, maps to None (nothing is known; its rows stay as they are).
    Panes whose tab carries orcr marks belong to an orcr instance (managed
    there) and are not listed; plain shells are not agents.
    """
    own = os.path.realpath(own_socket)
    found: dict[str, list[UnmanagedAgent] | None] = {}
    for name, sock in sessions():
        if name == own_session or os.path.realpath(sock) == own:
            continue
        client = HerdrClient(sock, timeout=DISCOVER_TIMEOUT, attempts=1)
        try:
            snap = client.request("session.snapshot", {})["snapshot"]
        except DriverError:
            if not running(sock, DISCOVER_TIMEOUT):
                continue
            found[name] = None
            continue
        found[name] = unmanaged(name, snap)
    return found
