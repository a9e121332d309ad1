"""An agent row's status and exit reason, as every reader of rows, events and the
socket's JSON sees them (imported from :mod:`orcr_core.contracts`)."""

from __future__ import annotations

from enum import StrEnum


class AgentStatus(StrEnum):
    """An agent row's ``status`` (DESIGN.md §4), in the order of its life.

    A ``StrEnum``: each member *is* its string (``AgentStatus.IDLE == "idle"``,
    ``json.dumps`` writes ``"idle"``), so rows, events and the socket's JSON are
    the same whether a writer used the member or the word.
    """

    QUEUED = "queued"
    STARTING = "starting"
    WORKING = "working"
    IDLE = "idle"
    LOST = "lost"
    ENDED = "ended"


class ExitReason(StrEnum):
    """Why an ``ended`` agent ended (its row's ``exit_reason``). ``done``: an
    ``agent run --rm`` agent whose first turn ended (its answer stays readable);
    ``oom``: the kernel killed it at its memory ceiling."""

    CANCELED = "canceled"
    FAILED = "failed"
    KILLED = "killed"
    EXITED = "exited"
    TIMEOUT = "timeout"
    LOST = "lost"
    GC = "gc"
    DONE = "done"
    OOM = "oom"
