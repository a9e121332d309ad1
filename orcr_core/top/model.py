"""The fleet as ``orcr top`` shows it: a ``watch.open`` snapshot plus every later event.

Pure Python (no Textual, no store): the screen, ``orcr top --once`` and the tests
all read this one model. Events are applied strictly by ``seq``: one at or below
the cursor is a duplicate and is ignored, one past ``cursor + 1`` is a gap and
raises :class:`Gap` (the caller re-snapshots), so nothing is missed or applied twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from orcr_core.paths import glob_match
from orcr_core.top.filtering import SORTS, Filter, loop_shown, sort_key
from orcr_core.top.loops import local_time, loop_info, loop_summary
from orcr_core.top.rows import (
    LIVE,
    RESUMABLE_ENDS,
    STATUS_RANK,
    STATUSES,
    Row,
    duration,
    first_line,
    flag,
    iso,
    parse_ts,
)

#: the names the view's modules and tests import from here (they live in ``rows``,
#: ``filtering`` and ``loops``)
__all__ = [
    "KEEP_ENDED",
    "LIVE",
    "RESUMABLE_ENDS",
    "SORTS",
    "STATUSES",
    "STATUS_RANK",
    "Filter",
    "FleetModel",
    "Gap",
    "Group",
    "Row",
    "duration",
    "first_line",
    "flag",
    "iso",
    "local_time",
    "loop_info",
    "loop_summary",
    "parse_ts",
    "sort_key",
]

#: ended rows the view keeps (they age out oldest first; the snapshot holds active rows)
KEEP_ENDED = 200


class Gap(Exception):
    """An event skipped past the cursor: the view can no longer be trusted; re-snapshot."""

    def __init__(self, expected: int, got: int):
        super().__init__(f"event {got} arrived while {expected} was expected; re-snapshot")
        self.expected = expected
        self.got = got


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
        self.activities: list[dict] = []  # landers and the like (kit/activities.py)
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
            if row.status not in LIVE:
                row.memory = None  # its group is gone (or not made yet)
            if row.status not in ("working", "idle"):
                row.parked = False  # no pane any more (or a new one, in its workspace)
            if "turn_status" in data:
                row.turn_status = data["turn_status"]
            if data.get("tokens") is not None:  # the turns that ended with this change
                row.tokens = (row.tokens or 0) + int(data["tokens"])
            if prev == "working" and row.status in ("idle", "ended", "lost"):
                row.answer_stale = True
            if row.status == "queued" and row.created is None:
                row.created = ts
            # every status change carries the row's turn: a row snapshotted while
            # starting (turn 0, its prompt.requested already before the cursor) is
            # right once it goes working
            row.turn = max(row.turn, int(data.get("turn") or 0))
        elif kind in ("prompt.requested", "prompt.applied"):
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

    def set_activities(self, activities: list[dict]) -> None:
        """What :func:`orcr_core.kit.activities.read_activities` found (read every second)."""
        self.activities = activities

    def set_status(self, status: dict) -> None:
        """The last server.status; it carries each live agent's memory (MEM)."""
        self.status = status or {}
        mem = (self.status.get("ceilings") or {}).get("agents")
        if mem is None:
            return  # a server without the field: keep what the snapshot said
        for r in self.rows.values():
            r.memory = mem.get(r.uuid) if r.status in LIVE else None

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
            # what the agents in view spent (their ended turns; None when none reported)
            "tokens": sum(spent)
            if (spent := [r.tokens for r in self.rows.values() if r.tokens is not None])
            else None,
            # why promotions wait (memory, multiplexer, a spent token budget), if they do
            "held_back": "; ".join(r for r in [s.get("held"), *_budget_reasons(s)] if r) or None,
            "drift": s.get("drift"),
            "drift_at": s.get("drift_at"),
            "unmanaged": s.get("unmanaged") or 0,  # agents in the user's other herdr sessions
            "driver": {"name": driver.get("name"), "error": driver.get("error")}
            if driver
            else None,
        }

    def groups(self, flt: Filter | None = None, sort: str = "path") -> list[Group]:
        """Rows grouped by level-1 path (a loop's runs sit under their loop), filtered, sorted."""
        key = sort_key(sort)
        by_group: dict[str, Group] = {}
        self._mark_held()
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
            if g is None and (not flt or loop_shown(flt, name)):
                g = by_group[name] = Group(name)
            if g is not None:
                g.loop = loop
        groups = [by_group[name] for name in sorted(by_group)]
        for g in groups:
            g.rows.sort(key=key)
        return groups

    def _mark_held(self) -> None:
        """Each queued row's hold, from the rows in view (exact at the cursor) and the
        last server.status: what holds the whole queue (memory, the multiplexer), else
        a full cap (``cap echo 3/3``, ``cap global 4/4``)."""
        live: dict[str, int] = {}
        for r in self.rows.values():
            if r.status in LIVE:
                live[r.provider] = live.get(r.provider, 0) + 1
        s = self.status
        whole = (s.get("held") or "").split(": ", 1)[0] or None
        limited = s.get("usage_limits") or {}  # a provider waiting out a usage limit
        cap = (s.get("caps") or {}).get("max")
        caps = s.get("providers") or {}
        for r in self.rows.values():
            own = (caps.get(r.provider) or {}).get("cap")
            r.held = (
                (whole or limited.get(r.provider) or _cap_held(live, cap, own, r.provider))
                if r.status == "queued"
                else None
            )

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
            "activities": self.activities,
            "groups": [
                {
                    "name": g.name,
                    "loop": loop_info(g.loop) if g.loop else None,
                    "agents": [r.to_json(now) for r in g.rows],
                }
                for g in self.groups(flt, sort)
            ],
        }


def _cap_held(live: dict[str, int], cap, own, provider: str) -> str | None:
    """As the server's queue.cap_held: the global cap first, then the provider's."""
    total = sum(live.values())
    if cap is not None and total >= cap:
        return f"cap global {total}/{cap}"
    if own is not None and live.get(provider, 0) >= own:
        return f"cap {provider} {live.get(provider, 0)}/{own}"
    return None


def _budget_reasons(status: dict) -> list[str]:
    return [b["reason"] for b in status.get("budgets") or [] if b.get("reason")]
