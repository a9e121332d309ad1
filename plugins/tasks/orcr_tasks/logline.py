"""A worker's log lines: one whole write per line, under one lock per process.

``print(msg, file=f)`` writes the text and its newline as two writes, so two slot
threads printing at once could merge their lines ("built -> review/" twice on one
line, then an empty one: a test counting them saw 199 of 200, issue 33 item 6).
"""

from __future__ import annotations

import threading
from typing import TextIO

#: shared by every worker and slot of the process: they may share one stream
_LOCK = threading.Lock()


def write_line(stream: TextIO, text: str) -> None:
    """Write ``text`` and its newline to ``stream`` in one call, flushed, while no other
    thread of this process writes a line."""
    line = text + "\n"
    with _LOCK:
        stream.write(line)
        stream.flush()
