"""Tell a running orcr server that a task moved to inbox/ or failed/ (a ``task.moved``
event: the notification rule ``task_parked`` reads it, docs/notifications.md).

Best effort and never in the way: no server is started for it, a server that does
not answer within TIMEOUT is skipped, and any error is swallowed; the move itself
is already done and durable.
"""

from __future__ import annotations

import socket

TIMEOUT = 2.0


def task_moved(root, task_id: str, src: str, dst: str, reason: str | None) -> bool:
    from orcr_core.client import Client, ServerError

    data = {"queue": str(root), "task": task_id, "from": src, "to": dst}
    if reason:
        data["reason"] = reason
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(TIMEOUT)
    try:
        with Client(autostart=False) as c:
            c.call("events.post", kind="task.moved", data=data)
        return True
    except (ServerError, OSError, ValueError):
        return False
    finally:
        socket.setdefaulttimeout(old)
