"""One agent as ``orcr top`` shows it (:class:`Row`), the statuses in their order and
the small formats its columns use (times, durations, the flags word). Pure Python."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from orcr_core.cli.agent_show import mem_text
from orcr_core.common.times import iso
from orcr_core.contracts import AgentStatus

LIVE = (AgentStatus.STARTING.value, AgentStatus.WORKING.value, AgentStatus.IDLE.value)
STATUSES = tuple(s.value for s in AgentStatus)
#: the status sort: what needs attention first
STATUS_RANK = {"working": 0, "idle": 1, "starting": 2, "queued": 3, "lost": 4, "ended": 5}
#: ended rows ``r`` can resume besides ``lost`` ones (``agents.resume.RESUMABLE_ENDS``;
#: the model stays free of the store, a test keeps the two equal)
RESUMABLE_ENDS = ("lost", "exited")


def parse_ts(value: str | None) -> float | None:
    """An RFC 3339 timestamp from the API as Unix seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def first_line(text: str | None) -> str | None:
    if text is None:
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def duration(seconds: float | None) -> str:
    """Compact time-in-status: 9s, 3m04s, 2h05m, 3d02h."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


@dataclass
class Row:
    """One agent as the view shows it."""

    uuid: str
    path: str
    provider: str
    status: str
    since: float | None = None  # when it entered ``status`` (Unix seconds)
    created: float | None = None
    turn: int = 0
    stalled: bool = False
    exit_reason: str | None = None
    error: str | None = None
    turn_status: str | None = None
    answer: str | None = None  # first line of the last answer, once fetched
    answer_stale: bool = False  # a turn ended since ``answer`` was read
    queue_seq: int | None = None
    pane_id: str | None = None
    blocked: str | None = None  # the agent's TUI asks a person this (at start or mid-turn)
    parked: bool = False  # its pane is in the parking area (agents/parking.py)
    worktree: str | None = None  # its own checkout's state (orcr_core/workspaces)
    tokens: int | None = None  # what its ended turns spent (None: no usage reported)
    held: str | None = None  # a queued row's hold (cap echo 3/3), set by the model's view
    #: a live agent's memory ``{current, max}`` (bytes) in its ceiling group: from the
    #: snapshot, then each server.status (``ceilings.agents``); None without a group
    memory: dict | None = None

    @property
    def flag(self) -> str:
        """The flags column: what to know beside the status (blocked wins)."""
        return flag(self.blocked, self.stalled, self.parked, self.worktree)

    @property
    def group(self) -> str:
        return self.path.partition("/")[0]

    def not_resumable(self) -> str | None:
        """Why ``r`` cannot resume this agent, or None when it can be asked to."""
        if self.status == "lost" or (self.status == "ended" and self.exit_reason in RESUMABLE_ENDS):
            return None
        now = self.status + (f" ({self.exit_reason})" if self.exit_reason else "")
        return f"{self.path} is {now}; r resumes a lost agent, or one that ended lost or exited"

    def signature(self) -> tuple:
        """What a drawn line shows of this row (the clock aside)."""
        return (
            self.path,
            self.provider,
            self.status,
            self.since,
            self.turn,
            self.tokens,
            self.stalled,
            self.exit_reason,
            self.answer,
            self.blocked,
            self.parked,
            self.worktree,
            self.held,
            mem_text(self.memory),
        )

    @classmethod
    def from_agent(cls, a: dict) -> Row:
        status = a["status"]
        since_field = {
            "queued": "created_at",
            "starting": "started_at",
            "working": "turn_started_at",
            "idle": "idle_since",
            "ended": "ended_at",
        }.get(status)
        since = parse_ts(a.get(since_field)) if since_field else None
        if since is None and status == "working":
            since = parse_ts(a.get("started_at"))
        return cls(
            uuid=a["uuid"],
            path=a["path"],
            provider=a.get("provider") or "",
            status=status,
            since=since,
            created=parse_ts(a.get("created_at")),
            turn=a.get("turn") or 0,
            stalled=bool(a.get("stalled")),
            exit_reason=a.get("exit_reason"),
            error=a.get("error"),
            queue_seq=a.get("queue_seq"),
            pane_id=a.get("pane_id"),
            blocked=a.get("blocked") if status in ("starting", "working") else None,
            parked=bool(a.get("parked")),
            worktree=(a.get("worktree") or {}).get("state"),
            tokens=(a.get("usage") or {}).get("tokens"),
            memory=a.get("memory") if status in LIVE else None,
            # an agent that has finished a turn has an answer worth reading
            answer_stale=status in ("idle", "ended", "lost") and (a.get("turn") or 0) > 0,
        )

    def to_json(self, now: float) -> dict:
        return {
            "uuid": self.uuid,
            "path": self.path,
            "provider": self.provider,
            "status": self.status,
            "since": iso(self.since),
            "in_status": None if self.since is None else round(max(0.0, now - self.since), 3),
            "turn": self.turn,
            "stalled": self.stalled,
            "exit_reason": self.exit_reason,
            "error": self.error,
            "answer": self.answer,
            "blocked": self.blocked,
            "parked": self.parked,
            "worktree": self.worktree,
            "tokens": self.tokens,
            "memory": self.memory,
            "held": self.held if self.status == "queued" else None,
        }


def tokens_text(n: int | None) -> str:
    """A token count for the TOKENS column: ``12.3k``; ``-`` without usage."""
    if n is None:
        return "-"
    return str(n) if n < 10_000 else f"{n / 1000:.1f}k" if n < 1_000_000 else f"{n / 1e6:.1f}M"


def flag(blocked, stalled: bool, parked: bool, worktree: str | None = None) -> str:
    """The word in top's flags column (STALLED): ``blocked``, ``stalled``, ``parked``,
    or ``wt`` for an agent in its own checkout (made, or kept after its end)."""
    if blocked or stalled or parked:
        return "blocked" if blocked else "stalled" if stalled else "parked"
    return "wt" if worktree in ("created", "kept") else ""
