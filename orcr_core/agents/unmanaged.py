"""Unmanaged discovery (seed 002): agents herdr detects in the user's other sessions.

They are rows of their own table (``unmanaged_agent``), keyed by (session,
terminal id), never ``agent`` rows: nothing that selects agents (the queue and
its caps, the monitor, GC, ``agent kill``, reconciliation's closes) can see one,
so orcr cannot act on one by accident. No verb acts on them at all.

Discovery rides the reconciliation pass (at server start and every
``timings.reconcile_every``), not a loop of its own: one read per other session
per pass, and no write transaction unless something changed.

Retention: a user's sessions come and go for years, and every terminal that
ever ran an agent would otherwise leave an ended row behind. Only the newest
``unmanaged.keep_ended`` ended rows (by ``ended_at``) are kept; older ones are
deleted by the pass that ends a row (in its transaction, with one
``unmanaged.pruned`` event), or by the next pass after the limit was lowered.
Live rows are never pruned, so the table holds at most the live terminals plus
``keep_ended`` rows.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from orcr_core.contracts import Discovery, DriverError, UnmanagedAgent
from orcr_core.store import events
from orcr_core.store.models import Unmanaged, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.unmanaged")

#: ended rows kept when no config says otherwise (config ``unmanaged.keep_ended``)
KEEP_ENDED = 1000


def _fields(a: UnmanagedAgent) -> dict:
    s = a.agent_session
    return {
        "kind": a.agent,
        "status": a.agent_status,
        "pane_id": a.pane_id,
        "workspace_id": a.workspace_id,
        "tab_id": a.tab_id,
        "cwd": a.cwd,
        "label": a.label,
        "name": a.name,
        "agent_session_source": s.source if s else None,
        "agent_session_kind": s.kind if s else None,
        "agent_session_value": s.value if s else None,
    }


def discover(server: ServerContext) -> int | None:
    """One discovery pass; the number of rows it changed, None when it could not look.

    A driver without ``discover`` (tmux) reports none, so rows left from an
    earlier herdr driver end.
    """
    drv = server.driver
    if drv is None:
        return None
    try:
        found = drv.discover() if isinstance(drv, Discovery) else {}
    except DriverError as exc:
        log.warning("unmanaged discovery skipped: %s", exc)
        return None
    except Exception:  # a user's session answered something odd: never stop reconciling
        log.exception("unmanaged discovery failed")
        return None
    config = getattr(server, "config", None)
    keep = int(config.get("unmanaged.keep_ended")) if config is not None else KEEP_ENDED
    return apply(found, keep)


def apply(found: dict[str, list[UnmanagedAgent] | None], keep: int = KEEP_ENDED) -> int:
    """Bring the table in line with what the driver found, in one transaction,
    with one event per change: ``unmanaged.ended``, ``unmanaged.updated``
    (naming the fields that changed), ``unmanaged.discovered``. A session that did not answer
    (None) keeps its rows; a session left out is gone, and so are its rows. Ended
    rows beyond the newest ``keep`` are deleted (:func:`prune`)."""
    seen: dict[tuple[str, str], dict] = {}
    for agents in found.values():
        for a in agents or ():
            seen[(a.session, a.terminal_id)] = _fields(a)
    unknown = {s for s, agents in found.items() if agents is None}
    rows = Unmanaged.select().where(Unmanaged.ended_at.is_null())
    live = {(r.session, r.terminal_id): r for r in rows}
    new = [k for k in seen if k not in live]
    changed = [k for k in seen if k in live and _diff(live[k], seen[k])]
    gone = [k for k in live if k not in seen and k[0] not in unknown]
    if not (new or changed or gone):
        if _ended_count() > keep:  # the limit was lowered: prune without other changes
            with db.atomic("IMMEDIATE"):
                prune(keep)
        return 0  # a steady world costs no write transaction
    now = time.time()
    with db.atomic("IMMEDIATE"):
        for key in gone:
            row = live[key]
            _set(row, status="ended", ended_at=now, updated_at=now)
            events.emit("unmanaged.ended", **_event(row))
        for key in changed:
            row = live[key]
            diff = _diff(row, seen[key])
            _set(row, updated_at=now, **diff)
            events.emit("unmanaged.updated", **_event(row, changed=sorted(diff)))
        for key in new:
            row = Unmanaged.get_or_none(
                (Unmanaged.session == key[0]) & (Unmanaged.terminal_id == key[1])
            )
            if row is None:
                row = Unmanaged.create(
                    session=key[0],
                    terminal_id=key[1],
                    discovered_at=now,
                    updated_at=now,
                    **seen[key],
                )
            else:  # ended when its session looked gone; herdr never reuses an id,
                # so this is the same terminal again
                _set(row, ended_at=None, updated_at=now, **seen[key])
            events.emit("unmanaged.discovered", **_event(row))
        if gone:
            prune(keep)
    return len(new) + len(changed) + len(gone)


def _ended_count() -> int:
    return Unmanaged.select().where(Unmanaged.ended_at.is_null(False)).count()


def prune(keep: int) -> int:
    """Delete the ended rows beyond the newest ``keep`` (by ``ended_at``), with an
    ``unmanaged.pruned`` event saying how many; in the caller's transaction."""
    ended = Unmanaged.ended_at.is_null(False)
    newest = (
        Unmanaged.select(Unmanaged.id)
        .where(ended)
        .order_by(Unmanaged.ended_at.desc(), Unmanaged.id.desc())
        .limit(keep)
    )
    n = Unmanaged.delete().where(ended & Unmanaged.id.not_in(newest)).execute()
    if n:
        events.emit("unmanaged.pruned", count=n, keep=keep)
    return n


def _diff(row: Unmanaged, fields: dict) -> dict:
    return {k: v for k, v in fields.items() if getattr(row, k) != v}


def _set(row: Unmanaged, **fields) -> None:
    Unmanaged.update(**fields).where(Unmanaged.id == row.id).execute()
    row.__data__.update(fields)


def _event(row: Unmanaged, **extra) -> dict:
    return {
        "session": row.session,
        "terminal_id": row.terminal_id,
        "agent_kind": row.kind,  # "kind" is the event's own
        "status": row.status,
        **extra,
    }


def live_count() -> int:
    return Unmanaged.select().where(Unmanaged.ended_at.is_null()).count()


def rows(all: bool = False) -> list[Unmanaged]:
    q = Unmanaged.select().order_by(Unmanaged.id)
    return list(q if all else q.where(Unmanaged.ended_at.is_null()))
