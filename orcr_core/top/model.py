"""The fleet as ``orcr top`` shows it: a ``watch.open`` snapshot plus every later event.

Pure Python (no Textual, no store): the screen, ``orcr top --once`` and the tests
all read this one model. Events are applied strictly by ``seq``: one at or below
the cursor is a duplicate and is ignored, one past ``cursor + 1`` is a gap and
raises :class:`Gap` (the caller re-snapshots), so nothing is missed or applied twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from orcr_core.paths import glob_match, is_glob

LIVE = ("starting", "working", "idle")
STATUSES = ("queued", "starting", "working", "idle", "lost", "ended")
#: ``s`` cycles through these
SORTS = ("path", "status", "age")
#: the status sort: what needs attention first
STATUS_RANK = {"working": 0, "idle": 1, "starting": 2, "queued": 3, "lost": 4, "ended": 5}
#: ended rows ``r`` can resume besides ``lost`` ones (``agents.resume.RESUMABLE_ENDS``;
#: the model stays free of the store, a test keeps the two equal)
RESUMABLE_ENDS = ("lost", "exited")
#: ended rows the view keeps (they age out oldest first; the snapshot holds active rows)
KEEP_ENDED = 200


class Gap(Exception):
    """An event skipped past the cursor: the view can no longer be trusted; re-snapshot."""

    def __init__(self, expected: int, got: int):
        super().__init__(f"event {got} arrived while {expected} was expected; re-snapshot")
        self.expected = expected
        self.got = got


def parse_ts(value: str | None) -> float | None:
    """An RFC 3339 timestamp from the API as Unix seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
            self.stalled,
            self.exit_reason,
            self.answer,
            self.blocked,
            self.parked,
            self.worktree,
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
        }


@dataclass
class Filter:
    """``/`` input: status words (``idle working``), ``stalled``, ``parked``, path globs
    (``review/*``, ``nightly/**``) or path substrings; kinds AND, terms of a kind OR."""

    statuses: frozenset[str] = frozenset()
    paths: tuple[str, ...] = ()
    stalled: bool = False
    text: str = ""
    parked: bool = False

    @classmethod
    def parse(cls, text: str) -> Filter:
        statuses, paths, stalled, parked = set(), [], False, False
        for term in text.split():
            if term in STATUSES:
                statuses.add(term)
            elif term == "stalled":
                stalled = True
            elif term == "parked":
                parked = True
            else:
                paths.append(term)
        return cls(frozenset(statuses), tuple(paths), stalled, text.strip(), parked)

    def __bool__(self) -> bool:
        return bool(self.statuses or self.paths or self.stalled or self.parked)

    def matches(self, row: Row) -> bool:
        if self.statuses and row.status not in self.statuses:
            return False
        if self.stalled and not row.stalled:
            return False
        if self.parked and not row.parked:
            return False
        if self.paths and not any(_path_match(p, row.path) for p in self.paths):
            return False
        return True

    @property
    def glob(self) -> str | None:
        """The one path glob of this filter, if that is all it is (``K`` kills it)."""
        if len(self.paths) == 1 and is_glob(self.paths[0]):
            return self.paths[0]
        return None


def _loop_shown(flt: Filter, name: str) -> bool:
    """A loop with no matching agents still shows when the filter names it."""
    if flt.statuses or flt.stalled or flt.parked:
        return False
    return any(_path_match(p, name) or p.rstrip("/*") == name for p in flt.paths)


def _path_match(term: str, path: str) -> bool:
    return glob_match(term, path) if is_glob(term) else term in path


def flag(blocked, stalled: bool, parked: bool, worktree: str | None = None) -> str:
    """The word in top's flags column (STALLED): ``blocked``, ``stalled``, ``parked``,
    or ``wt`` for an agent in its own checkout (made, or kept after its end)."""
    if blocked or stalled or parked:
        return "blocked" if blocked else "stalled" if stalled else "parked"
    return "wt" if worktree in ("created", "kept") else ""


def local_time(value: str | None) -> str | None:
    """An RFC 3339 instant in this machine's local time: ``2026-12-01 09:00 CET``."""
    if not value:
        return None
    dt = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone()
    return dt.strftime("%Y-%m-%d %H:%M %Z")


def loop_info(loop: dict) -> dict:
    """What the view shows of a loop: schedule, next fire, runs, last run."""
    last = loop.get("last_run") or {}
    schedule = loop.get("cron") or (f"once at {loop['once_at']}" if loop.get("once_at") else "")
    return {
        "name": loop["name"],
        "uuid": loop.get("uuid"),
        "status": loop.get("status"),
        "schedule": schedule,
        "tz": loop.get("tz"),
        "next_fire_at": loop.get("next_fire_at"),
        "next_fire": local_time(loop.get("next_fire_at")),
        "running": loop.get("running", 0),
        "pending": loop.get("pending", 0),
        "last_run": last.get("run_id"),
        "last_run_status": last.get("status"),
        "missed": (loop.get("last_missed") or {}).get("why"),
    }


def loop_summary(info: dict) -> str:
    """``loop 0 9 * * 1-5 Europe/Paris · next 2026-12-01 09:00 CET · 1 running · last ok``."""
    parts = [f"loop {info['schedule']} {info['tz'] or ''}".rstrip()]
    if info["status"] == "paused":
        parts.append("PAUSED")
    elif info["next_fire"]:
        parts.append(f"next {info['next_fire']}")
    parts.append(f"{info['running']} running, {info['pending']} pending")
    if info["last_run_status"]:
        parts.append(f"last {info['last_run_status']}")
    if info.get("missed"):  # the machine was off, not the loop broken
        parts.append(f"missed: {info['missed']}")
    return " · ".join(parts)


def sort_key(sort: str):
    if sort == "status":
        return lambda r: (STATUS_RANK.get(r.status, 9), r.path)
    if sort == "age":  # oldest first
        return lambda r: (r.created or 0.0, r.path)
    return lambda r: r.path


@dataclass
class Group:
    name: str
    rows: list[Row] = field(default_factory=list)
    loop: dict | None = None  # the loop of this name, when there is one (loop.list)


class FleetModel:
    """Snapshot + events → rows. Not thread-safe: one owner applies everything."""

    def __init__(self, keep_ended: int = KEEP_ENDED):
        self.keep_ended = keep_ended
        self.rows: dict[str, Row] = {}
        self.seq: int | None = None  # the cursor: the last event applied
        self.snapshot_seq: int | None = None
        self.status: dict = {}  # the last server.status
        self.loops: dict[str, dict] = {}  # active loops by name (loop.list)
        self.duplicates = 0  # events ignored because already applied
        self.applied = 0

    # -- the stream ---------------------------------------------------------

    def load_snapshot(self, snap: dict) -> list[str]:
        """Replace the view with a ``watch.open`` snapshot.

        Agents that were active before and are absent now ended while the view
        was not watching: they show as ended and their uuids are returned, so the
        caller can fetch their final rows. Ended rows already known are kept.
        """
        old = self.rows
        self.rows = {}
        for a in snap["agents"]:
            row = Row.from_agent(a)
            prev = old.get(row.uuid)
            if prev is not None:
                row.answer = prev.answer
                unchanged = prev.turn == row.turn and prev.status == row.status
                row.answer_stale = row.answer_stale and (prev.answer_stale or not unchanged)
            self.rows[row.uuid] = row
        vanished = []
        for uuid, row in old.items():
            if uuid in self.rows:
                continue
            if row.status == "ended":
                self.rows[uuid] = row
            else:  # not in the active snapshot: it ended; the caller fetches how
                vanished.append(uuid)
                row.status, row.since, row.exit_reason, row.stalled = "ended", None, None, False
                self.rows[uuid] = row
        self.seq = self.snapshot_seq = snap["snapshot_seq"]
        self._trim()
        return vanished

    def apply(self, ev: dict) -> bool:
        """Apply one event; False for a duplicate, :class:`Gap` for a skipped seq."""
        if self.seq is None:
            raise Gap(0, ev["seq"])
        seq = ev["seq"]
        if seq <= self.seq:
            self.duplicates += 1
            return False
        if seq != self.seq + 1:
            raise Gap(self.seq + 1, seq)
        self.seq = seq
        self.applied += 1
        self._apply(ev)
        return True

    def apply_batch(self, events: list[dict]) -> int:
        """Apply events in order; returns how many were new."""
        n = 0
        for ev in events:
            n += self.apply(ev)
        if n:
            self._trim()
        return n

    def _apply(self, ev: dict) -> None:
        kind = ev["kind"]
        uuid = ev.get("agent")
        if not uuid or not kind.startswith(("agent.", "prompt.", "pane.", "worktree.")):
            return
        data = ev.get("data") or {}
        ts = ev.get("ts")
        row = self.rows.get(uuid)
        if kind == "agent.queued":
            self.rows[uuid] = Row(
                uuid=uuid,
                path=data.get("path", "?"),
                provider=data.get("provider", ""),
                status="queued",
                since=ts,
                created=ts,
                queue_seq=data.get("queue_seq"),
            )
            return
        if row is None:
            if kind != "agent.status" or "path" not in data:
                return  # an event about an agent this view never held
            row = self.rows[uuid] = Row(
                uuid=uuid, path=data["path"], provider=data.get("provider", ""), status="?"
            )
        if kind == "agent.status":
            prev = row.status
            row.status = data["to"]
            row.since = ts
            if data.get("exit_reason") is not None or row.status != "ended":
                row.exit_reason = data.get("exit_reason")
            if "error" in data:
                row.error = data["error"]
            if row.status != "working":
                row.stalled = False
            if row.status not in ("starting", "working") or prev == "working":
                row.blocked = None  # a question is over with its turn
            if row.status not in ("working", "idle"):
                row.parked = False  # no pane any more (or a new one, in its workspace)
            if "turn_status" in data:
                row.turn_status = data["turn_status"]
            if prev == "working" and row.status in ("idle", "ended", "lost"):
                row.answer_stale = True
            if row.status == "queued" and row.created is None:
                row.created = ts
        elif kind == "prompt.requested":
            row.turn = max(row.turn, int(data.get("turn") or 0))
        elif kind == "agent.blocked":
            row.blocked = data.get("reason") or "blocked"
        elif kind in ("agent.unblocked", "agent.dialog_answered"):
            row.blocked = None
        elif kind == "agent.stalled":
            row.stalled = bool(data.get("stalled", True))
        elif kind == "pane.moved":
            row.parked = bool(data.get("parked"))
            row.pane_id = data.get("pane_id", row.pane_id)
        elif kind.startswith("worktree."):
            row.worktree = kind.partition(".")[2]  # requested, created, kept, removed
        elif kind in ("pane.start_applied", "agent.rematched", "agent.repaired"):
            row.pane_id = data.get("pane_id", row.pane_id)

    def _trim(self) -> None:
        ended = [r for r in self.rows.values() if r.status == "ended"]
        if len(ended) > self.keep_ended:
            ended.sort(key=lambda r: r.since or 0.0)
            for r in ended[: len(ended) - self.keep_ended]:
                del self.rows[r.uuid]

    # -- other inputs -------------------------------------------------------

    def set_final(self, agent: dict) -> None:
        """The row of an agent that vanished from a re-snapshot (``agent.get``)."""
        row = Row.from_agent(agent)
        prev = self.rows.get(row.uuid)
        if prev is not None:
            row.answer = prev.answer
        self.rows[row.uuid] = row
        self._trim()

    def set_loops(self, loops: list[dict]) -> None:
        """The loops as ``loop.list`` returns them (asked again after loop events)."""
        self.loops = {lp["name"]: lp for lp in loops if lp.get("status") != "ended"}

    def set_status(self, status: dict) -> None:
        self.status = status or {}

    def set_answer(self, uuid: str, text: str | None) -> None:
        row = self.rows.get(uuid)
        if row is not None:
            row.answer = first_line(text)
            row.answer_stale = False

    def stale_answers(self) -> list[str]:
        return [r.uuid for r in self.rows.values() if r.answer_stale]

    # -- what the screen shows ----------------------------------------------

    def header(self) -> dict:
        """Queue depth and live counts from the rows (exact at the cursor); caps,
        held-back reasons, drift and the multiplexer from the last server.status."""
        counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
        per_provider: dict[str, int] = {}
        stalled = blocked = parked = 0
        for r in self.rows.values():
            counts[r.status] = counts.get(r.status, 0) + 1
            if r.status in LIVE:
                per_provider[r.provider] = per_provider.get(r.provider, 0) + 1
            stalled += r.stalled
            blocked += r.blocked is not None
            parked += r.parked
        s = self.status
        caps = s.get("providers") or {}
        providers = {
            name: {"live": per_provider.get(name, 0), "cap": (caps.get(name) or {}).get("cap")}
            for name in sorted(set(caps) | set(per_provider))
        }
        driver = s.get("driver") or {}
        return {
            "queue_depth": counts["queued"],
            "live": sum(counts[x] for x in LIVE),
            "cap": (s.get("caps") or {}).get("max"),
            "providers": providers,
            "statuses": counts,
            "stalled": stalled,
            "blocked": blocked,
            "parked": parked,
            "held_back": s.get("held") or None,  # why promotions wait (memory), if they do
            "drift": s.get("drift"),
            "unmanaged": s.get("unmanaged") or 0,  # agents in the user's other herdr sessions
            "driver": {"name": driver.get("name"), "error": driver.get("error")}
            if driver
            else None,
        }

    def groups(self, flt: Filter | None = None, sort: str = "path") -> list[Group]:
        """Rows grouped by level-1 path (a loop's runs sit under their loop), filtered, sorted."""
        key = sort_key(sort)
        by_group: dict[str, Group] = {}
        rows = self.rows.values()
        if flt:
            rows = [r for r in rows if flt.matches(r)]
        for r in rows:
            name = r.path.partition("/")[0]
            g = by_group.get(name)
            if g is None:
                g = by_group[name] = Group(name)
            g.rows.append(r)
        for name, loop in self.loops.items():
            g = by_group.get(name)
            if g is None and (not flt or _loop_shown(flt, name)):
                g = by_group[name] = Group(name)
            if g is not None:
                g.loop = loop
        groups = [by_group[name] for name in sorted(by_group)]
        for g in groups:
            g.rows.sort(key=key)
        return groups

    def matching(self, glob: str) -> list[Row]:
        """Active rows a kill of ``glob`` would reach (the confirmation's count)."""
        return sorted(
            (r for r in self.rows.values() if r.status != "ended" and glob_match(glob, r.path)),
            key=lambda r: r.path,
        )

    def frame(self, flt: Filter | None = None, sort: str = "path", now: float | None = None):
        """One frame as data: what ``orcr top --once --json`` prints."""
        now = time.time() if now is None else now
        return {
            "seq": self.seq,
            "snapshot_seq": self.snapshot_seq,
            "sort": sort,
            "filter": flt.text if flt else "",
            "header": self.header(),
            "groups": [
                {
                    "name": g.name,
                    "loop": loop_info(g.loop) if g.loop else None,
                    "agents": [r.to_json(now) for r in g.rows],
                }
                for g in self.groups(flt, sort)
            ],
        }
