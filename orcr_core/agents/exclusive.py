"""One change of a live agent's fate at a time.

An ending (kill, idle GC, a turn's timeout, a failed or canceled start) and
``agent send`` each hold the agent's lock while they decide and act. Each re-reads
the row once it holds it, so:

- a kill and the monitor ending the same agent close its pane once: the second
  finds it ended;
- idle GC and ``agent send`` never interleave: either the send made the agent
  working first and GC, deciding on ``idle``, leaves it; or GC closed the pane and
  ended the row first and the send is refused because the agent is no longer idle.
  Without this a send could move the agent to working while GC's close was under
  way, and the agent ended ``gc`` from working (the chaos soak's seed 1046942382).
"""

from __future__ import annotations

import contextlib
import threading

_LOCK = threading.Lock()
_held: dict[str, list] = {}  # agent uuid -> [its lock, how many callers hold or wait]


@contextlib.contextmanager
def agent_lock(uuid: str):
    """Hold agent ``uuid``'s lock (not reentrant); waiters queue behind the holder."""
    with _LOCK:
        entry = _held.setdefault(uuid, [threading.Lock(), 0])
        entry[1] += 1
    try:
        with entry[0]:
            yield
    finally:
        with _LOCK:
            entry[1] -= 1
            if not entry[1]:
                _held.pop(uuid, None)
