"""Waiting for an agent: :meth:`orcr_core.sdk.Orcr.wait` and how it ends.

A watch (:class:`orcr_core.sdk.watch.Watcher`) on the agent, read until it is
idle (or ended); a server restart meanwhile is ridden out by the watch.
"""

from __future__ import annotations

import time

from orcr_core.sdk.client import Client, ServerError
from orcr_core.sdk.params import scope_hint, scoped
from orcr_core.sdk.watch import RESNAPSHOT, Watcher

TYPE_CHECKING = False  # typing costs milliseconds at every CLI start
if TYPE_CHECKING:
    from collections.abc import Callable

#: exit reasons after which ``wait`` reports failure
BAD_ENDINGS = ("failed", "timeout", "lost", "canceled")


class WaitTimeout(ServerError):
    def __init__(self, message: str):
        super().__init__("wait_timeout", message)


class AgentEnded(ServerError):
    def __init__(self, agent: dict):
        msg = f"agent {agent['path']} ended: {agent['exit_reason']}"
        if agent.get("error"):
            msg += f" ({agent['error']})"
        super().__init__("agent_ended", msg)
        self.agent = agent


def wait_for(
    client: Client,
    target: str,
    until: str = "idle",
    timeout: float | None = None,
    on_change: Callable[[dict], None] | None = None,
) -> dict:
    """:meth:`orcr_core.sdk.Orcr.wait` over ``client``'s server (its own connection)."""
    if until not in ("idle", "ended"):
        raise ValueError("until must be 'idle' or 'ended'")
    deadline = None if timeout is None else time.monotonic() + timeout
    given, target = target, scoped(target)
    w = Watcher(client.path, client.autostart, target)
    try:
        try:
            agent = _pick(w.snapshot["agents"], target)
        except ServerError as exc:
            if target != given:
                exc.message = scope_hint(exc.message, given, target)
                exc.args = (exc.message,)
            raise
        while True:
            if on_change:
                on_change(agent)
            if _done(agent, until):
                return agent
            left = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(
                        f"agent {agent['path']} still {agent['status']} after {timeout:g}s"
                    )
            ev = w.next(left)
            if ev is None:
                continue
            if ev["kind"] == RESNAPSHOT:
                agent = _pick(ev["data"]["agents"], agent["uuid"])
            elif ev["agent"] == agent["uuid"] and ev["kind"] == "agent.status":
                d = ev["data"]
                agent = dict(
                    agent,
                    status=d["to"],
                    exit_reason=d.get("exit_reason"),
                    error=d.get("error", agent.get("error")),
                )
                if "turn_status" in d:  # a turn ended: how
                    agent.update(
                        turn=d.get("turn", agent["turn"]),
                        turn_status=d["turn_status"],
                        turn_error=d.get("turn_error"),
                    )
    finally:
        w.close()


def _pick(rows: list[dict], target: str) -> dict:
    """The row ``target`` names: by uuid, else the active one, else the newest."""
    if not rows:
        raise ServerError("not_found", f"no agent {target!r}")
    for a in rows:
        if a["uuid"] == target:
            return a
    active = [a for a in rows if a["status"] != "ended"]
    return active[0] if active else max(rows, key=lambda a: a["created_at"] or "")


def _done(agent: dict, until: str) -> bool:
    if agent["status"] == "ended":
        if agent["exit_reason"] == "done":
            return True  # an --rm agent: its turn ended, as idle would say
        if agent["exit_reason"] in BAD_ENDINGS or until == "idle":
            raise AgentEnded(agent)
        return True
    return until == "idle" and agent["status"] == "idle"
