"""Fault injection for crash tests: inert unless ``ORCR_FAULT`` is set.

``ORCR_FAULT=<point>`` SIGKILLs the server the first time execution reaches
``faults.point("<point>")``; ``<point>:<n>`` at the n-th time. The points are
listed in docs/internals.md; the crash tests kill the server at each of them.
"""

from __future__ import annotations

import os
import signal
import threading

_SPEC = os.environ.get("ORCR_FAULT", "")
_hits: dict[str, int] = {}
_lock = threading.Lock()


def point(name: str) -> None:
    if not _SPEC:
        return
    want, _, nth = _SPEC.partition(":")
    if want != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] >= int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)
