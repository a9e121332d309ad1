"""Server-held requests: ``agent.wait``, ``agent.prompt`` (with ``wait``), ``events.wait``.

Each handler checks its preconditions under the app lock, then returns a
:class:`Deferred` whose ``run()`` polls (taking the lock briefly) outside it,
so other requests keep flowing while one connection waits (ORCR-NOTES §10).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from orcr_testing.herdr.replies import Deferred
from orcr_testing.herdr.transport import ApiError

if TYPE_CHECKING:
    from orcr_testing.herdr.emulator import Emulator

POLL = 0.05
PROMPT_SUBMIT_DELAY = 0.3  # AGENT_PROMPT_SUBMIT_DELAY
PROMPT_STALL = 5.0  # a prompt must cause some state change within this
DEFAULT_UNTIL = ("idle", "done", "blocked")


def _agent_pane(emu: Emulator, target: str):
    from orcr_testing.herdr.agent_handlers import _agent_pane as find

    return find(emu, target)


def _occupant(pane) -> tuple:
    return (pane.pane_id, pane.terminal_id, pane.agent)


def _wait_status(emu: Emulator, pane_id: str, occupant: tuple, until, deadline, seq_from=None):
    """Poll until the agent's status is in ``until``; ``agent_not_running`` if it went away."""
    while True:
        with emu.lock:
            try:
                pane = emu.state.find_pane(pane_id)
            except ApiError:
                pane = None
            if pane is None or _occupant(pane) != occupant or emu.stopped.is_set():
                raise ApiError("agent_not_running", f"agent in {pane_id} is not running")
            if seq_from is None and pane.agent_status in until:
                return {"type": "agent_info", "agent": emu.state.views.agent(pane)}
            if seq_from is not None and pane.state_change_seq > seq_from[0]:
                return None
        if deadline is not None and time.monotonic() >= deadline:
            raise ApiError("timeout", "timed out waiting for the agent")
        time.sleep(POLL)


def agent_wait(emu: Emulator, params: dict, rid: str):
    pane = _agent_pane(emu, params["target"])
    until = tuple(params.get("until") or DEFAULT_UNTIL)
    timeout_ms = params.get("timeout_ms")
    deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms is not None else None
    occupant = _occupant(pane)
    return Deferred(lambda: _wait_status(emu, pane.pane_id, occupant, until, deadline))


def agent_prompt(emu: Emulator, params: dict, rid: str):
    pane = _agent_pane(emu, params["target"])
    if pane.pending_resume or not pane.live:
        raise ApiError("agent_not_ready", f"agent in {pane.pane_id} is not ready")
    text = params["text"]
    if not text.strip():
        raise ApiError("empty_agent_prompt", "prompt text is empty")
    data = text.encode()
    if pane.proc is not None and pane.proc.bracketed_paste:
        data = b"\x1b[200~" + data + b"\x1b[201~"
    emu.state.deliver(pane, "agent.prompt", [("text", data)])
    occupant, was_working, seq = (
        _occupant(pane),
        pane.agent_status == "working",
        pane.state_change_seq,
    )

    def submit() -> None:
        with emu.lock:
            try:
                target = emu.state.find_pane(occupant[0], live=True)
            except ApiError:
                return
            if _occupant(target) == occupant:
                try:
                    emu.state.deliver(target, "agent.prompt", [("enter", b"\r")])
                except ApiError:
                    pass

    timer = threading.Timer(PROMPT_SUBMIT_DELAY, submit)
    timer.daemon = True
    timer.start()
    wait = params.get("wait")
    if wait is None:
        return {"type": "agent_prompted", "agent": emu.state.views.agent(pane)}
    until = tuple(wait.get("until") or DEFAULT_UNTIL)
    timeout_ms = wait.get("timeout_ms")
    deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms is not None else None

    def run() -> dict:
        if not was_working:
            stall = time.monotonic() + PROMPT_STALL
            limit = stall if deadline is None else min(stall, deadline)
            try:
                _wait_status(emu, occupant[0], occupant, until, limit, seq_from=(seq,))
            except ApiError as err:
                if err.code != "timeout":
                    raise
                if timeout_ms is not None and timeout_ms <= PROMPT_STALL * 1000:
                    raise
                raise ApiError("agent_prompt_stalled", "the agent did not react") from None
        info = _wait_status(emu, occupant[0], occupant, until, deadline)
        return {"type": "agent_prompted", "agent": info["agent"]}

    return Deferred(run)


def events_wait(emu: Emulator, params: dict, rid: str):
    match = params["match_event"]
    if match["event"] != "pane_agent_status_changed":
        raise ApiError("unsupported_event_wait_match", f"cannot wait for {match['event']}")
    pane = emu.state.find_pane(match["pane_id"])
    want = match["agent_status"]
    timeout_ms = params.get("timeout_ms")
    deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms is not None else None
    pane_id = pane.pane_id

    def run() -> dict:
        while True:
            with emu.lock:
                current = emu.state.find_pane(pane_id)
                if current.agent_status == want:
                    data = {
                        "type": "pane_agent_status_changed",
                        "pane_id": pane_id,
                        "workspace_id": current.workspace_id,
                        "agent_status": want,
                    }
                    if current.agent:
                        data["agent"] = current.agent
                    event = {"event": "pane_agent_status_changed", "data": data}
                    return {"type": "wait_matched", "event": event}
            if deadline is not None and time.monotonic() >= deadline:
                raise ApiError("timeout", "timed out waiting for the event")
            time.sleep(POLL)

    return Deferred(run)


WAIT_HANDLERS = {
    "agent.wait": agent_wait,
    "agent.prompt": agent_prompt,
    "events.wait": events_wait,
}
