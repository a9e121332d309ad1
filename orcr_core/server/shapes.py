"""What the socket methods share: the JSON shape of an agent row, and parameter checks."""

from __future__ import annotations

import json

from orcr_core.ceilings import step as ceilings_step
from orcr_core.common.times import iso
from orcr_core.protocol import ProtocolError
from orcr_core.store.models import LIVE, Agent
from orcr_core.workspaces import plan as workspace_plan


def session_dict(row) -> dict | None:
    """The agent session pointer of an Agent or UnmanagedAgent row, or None."""
    if not row.agent_session_value:
        return None
    return {
        "source": row.agent_session_source,
        "kind": row.agent_session_kind,
        "value": row.agent_session_value,
    }


def parked(a: Agent) -> bool:
    """The agent's pane is in the parking area (only a live agent has a pane)."""
    return a.parked_at is not None and a.status in LIVE


def place(a: Agent) -> str | None:
    """Where a live agent's pane is: ``parking`` (the parking area) or
    ``workspace <level-1>`` (the names ``pane.moved`` events use); None without a pane."""
    if a.status not in LIVE or not a.pane_id:
        return None
    return "parking" if parked(a) else f"workspace {a.path.split('/', 1)[0]}"


def agent_dict(a: Agent) -> dict:
    return {
        "uuid": a.uuid,
        "path": a.path,
        "name": a.name,
        "provider": a.provider,
        "status": a.status,
        "exit_reason": a.exit_reason,
        "error": a.error,
        "queue_seq": a.queue_seq,
        "managed": a.managed,
        "cwd": a.cwd,
        "turn": a.turn,
        "turn_status": a.turn_status,
        "turn_error": a.turn_error,
        "timeout": a.timeout,
        # agent run --rm: it ends (done) with its first turn; gc_after: its own idle GC
        "rm": bool(a.rm),
        "gc_after": a.gc_after,
        # parked: the live agent's pane is in this instance's parking area
        # (agents/parking.py); place says where the pane is
        "parked": parked(a),
        "parked_at": iso(a.parked_at) if parked(a) else None,
        "place": place(a),
        "move_state": a.move_state,
        "cancel_requested": a.cancel_requested,
        "blocked": a.blocked_reason,
        "blocked_since": iso(a.blocked_at),
        "workspace_id": a.workspace_id,
        "tab_id": a.tab_id,
        "pane_id": a.pane_id,
        "agent_session": session_dict(a),
        "created_at": iso(a.created_at),
        "started_at": iso(a.started_at),
        "ended_at": iso(a.ended_at),
        "idle_since": iso(a.idle_since),
        "turn_started_at": iso(a.turn_started_at),
        # a flag, not a status: working, but its transcript has not grown for
        # timings.stall_after since before stalled_at (agents/stall.py)
        "stalled": a.stalled_at is not None and a.status == "working",
        "stalled_at": iso(a.stalled_at) if a.status == "working" else None,
        # its own checkout (orcr_core/workspaces), and per-run provider options
        "worktree": workspace_plan.public(a),
        "model": a.model,
        "args": json.loads(a.run_args) if a.run_args else None,
        # a live agent's group: memory {current, peak, high, max} and pids {current,
        # max, refused} in bytes and counts (orcr_core/ceilings); None without one
        **((ceilings_step.usage(a.uuid) or {}) if a.status in LIVE else {}),
    }


def param(params: dict, key: str, kind, required: bool = True, default=None):
    if key not in params or params[key] is None:
        if required:
            raise ProtocolError("invalid_params", f"missing parameter {key!r}")
        return default
    value = params[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(
            "invalid_params", f"parameter {key!r} must be {getattr(kind, '__name__', kind)}"
        )
    return value
