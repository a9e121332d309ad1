"""What the emulator's handlers return besides a plain reply, and what a schema
check records: a leaf, so the handlers and the request loop (:mod:`serving`) share
these without importing each other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Violation:
    """A message that does not match the schema. ``kind``: request, reply or event."""

    kind: str
    errors: list[str]
    message: Any


class Deferred:
    """Returned by a waiting handler: ``run()`` is called outside the app lock and
    returns the result (or raises :class:`~orcr_testing.herdr.transport.ApiError`) while the connection stays open."""

    def __init__(self, run: Callable[[], dict]):
        self.run = run


class Stream:
    """Returned by the ``events.subscribe`` handler: the entries to stream after the ack.

    ``lost`` (herdr 0.9): set to make the stream answer ``events_lost`` and close at
    its next wake (a test's :meth:`TestHooks.lose_events`, or an overrun)."""

    def __init__(self, entries: list, request_id: str = ""):
        self.entries = entries
        self.request_id = request_id
        self.lost = threading.Event()
